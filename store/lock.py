"""Opening a database that another process holds: DuckDB lets one process write
a file, or several read it, and refuses the others at once. This says which
process holds the file and what to do, and waits for it up to a limit."""
import re
import sys
import time

import duckdb
from ..errors import TracedbError

_HOLDER = re.compile(r"Conflicting lock is held in (.*?) \(PID (\d+)\)")


class DatabaseLocked(TracedbError, duckdb.IOException):
    """The file is held by another process (a duckdb.IOException, as before)."""


def is_lock_error(e):
    """True for DuckDB's refusal to open a file another process holds."""
    return isinstance(e, duckdb.IOException) and ("Could not set lock" in str(e) or "Conflicting lock" in str(e))


def holder(e):
    """'PID 1234: tracedb ingest ...' (its command line when readable) of a lock error, or None."""
    m = _HOLDER.search(str(e))
    if not m:
        return None
    pid = m.group(2)
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = " ".join(a.decode("utf-8", "replace") for a in f.read().split(b"\0") if a)
    except OSError:
        cmd = m.group(1)
    cmd = " ".join(cmd.split())
    return f"PID {pid}: {cmd[:120]}{'...' if len(cmd) > 120 else ''}"


def describe(path, e, waited_s=0.0):
    who = holder(e) or "another process"
    waited = f" (waited {waited_s:.1f} s)" if waited_s else ""
    return (f"{path}: the database is in use by {who}{waited}; DuckDB lets one process write a file "
            "(or several read it) at a time: wait for that process to finish, or give --wait SECONDS")


def open_waiting(connect, path, wait_s=0.0, say=None):
    """connect() retried while another process holds the file, for up to wait_s
    seconds; say(line) is told once that it waits. DatabaseLocked when it gives up."""
    deadline = time.monotonic() + (wait_s or 0)
    start = time.monotonic()
    told = False
    while True:
        try:
            return connect()
        except duckdb.Error as e:
            if not is_lock_error(e):
                raise
            if time.monotonic() >= deadline:
                raise DatabaseLocked(describe(path, e, time.monotonic() - start if wait_s else 0)) from None
            if not told and say is not None:
                say(f"{path}: in use by {holder(e) or 'another process'}; waiting up to {wait_s:g} s")
                told = True
            time.sleep(min(0.25, max(0.0, deadline - time.monotonic())))


def say_on_stderr(line):
    print(f"tracedb: {line}", file=sys.stderr, flush=True)
