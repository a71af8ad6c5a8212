"""Temporary work directories that a killed run does not leave behind for good.

Every ingest copies its input (a trace's event array: as large as the trace)
into a directory under $TMPDIR. A run killed with SIGKILL cannot remove it, so
each directory holds a `lock` file that its process keeps flock()ed while it
lives; the next run removes every tracedb directory whose lock it can take (its
owner is gone; flock is released by the kernel when a process dies, whatever
killed it, and works across PID namespaces that share the filesystem).
"""
import fcntl
import os
import shutil
import tempfile
from contextlib import contextmanager

PREFIX = "tracedb-"
LOCK = "lock"


def sweep(parent=None):
    """Remove the work directories of tracedb processes that are gone; returns their paths."""
    parent = parent or tempfile.gettempdir()
    removed = []
    try:
        names = os.listdir(parent)
    except OSError:
        return removed
    for name in names:
        d = os.path.join(parent, name)
        if not name.startswith(PREFIX) or not os.path.isfile(os.path.join(d, LOCK)):
            continue
        try:
            fd = os.open(os.path.join(d, LOCK), os.O_RDWR)
        except OSError:
            continue                  # not ours (another user), or just removed
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)              # its process is alive
            continue
        shutil.rmtree(d, ignore_errors=True)
        os.close(fd)
        removed.append(d)
    return removed


@contextmanager
def workdir(prefix=PREFIX):
    """A temporary directory, locked while this process uses it, removed after."""
    sweep()
    hidden = tempfile.mkdtemp(prefix="." + prefix)     # locked before a sweep can see it
    fd = os.open(os.path.join(hidden, LOCK), os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    d = os.path.join(os.path.dirname(hidden), os.path.basename(hidden)[1:])
    os.rename(hidden, d)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)
        os.close(fd)
