"""Chrome-trace JSON (Kineto, XProf trace_viewer): find the event array, stream it out.

A trace is either an object `{..., "traceEvents": [...], ...}` or a bare array
`[...]` (which Chrome allows to be cut off before its `]`). The reader never
builds the document in Python: it cuts the event array, as bytes, into pieces
(up to ~128 MB, each a JSON array of whole events, cut between two events) and
parses the small members before and after it. An uncompressed file's members are
read in place and its pieces are named pipes the kernel feeds from the file as
DuckDB reads them (_Pipes: nothing is written); the exact path and a failed load's
diagnosis read piece files instead, copied by a thread (_PieceFeed). A compressed
file is inflated into piece files, by a thread while the load parses those already
whole when its prologue gives the base time; on Linux those pieces are held in
memory (_MemoryPieces), a few at a time, instead of written to $TMPDIR.
DuckDB's JSON reader then scans the pieces, one thread per piece (the fast
path: it reads a single array on one thread), or `exact_batches` streams them
element by element into Arrow batches, keeping every number's text (the exact
path, for traces whose timestamps a double cannot hold to the nanosecond, and
for cut-off arrays).

A cut is made at a `},{` found near the piece's end. Should one fall inside an
event (an array of objects in its args), the piece ending there is not valid
JSON, DuckDB rejects it, and the caller loads the joined pieces instead
(`join_pieces`): a cut never changes what is loaded.
"""
import codecs
import decimal
import errno
import functools
import json
import os
import queue
import re
import signal
import sys
import threading
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from .errors import IngestError
from ..progress import byte_bar
from .source import CHUNK, open_bytes, problem

_DEC = json.JSONDecoder()
_WS = " \t\r\n\ufeff"
HEAD_MAX = 64 << 20
TAIL = 1 << 20                 # the end of the content, where members after the array live: never cut
# Pieces of 128 MB (~340 k Kineto events, several row groups each): with 64 MB
# pieces the many part-filled row groups made DuckDB rewrite the whole table at
# its next checkpoint (1.5 s, and a file twice the size, for a 1 GB trace).
PIECE_BYTES = 128 << 20
CUT_WINDOW = 1 << 20
_CUT = re.compile(rb"\}\s*,\s*\{")

# Columns of the raw event relation that both paths produce, as DuckDB types.
RAW_COLUMNS = {
    "ph": "VARCHAR", "cat": "VARCHAR", "name": "VARCHAR", "pid": "VARCHAR",
    "tid": "VARCHAR", "ts": "VARCHAR", "dur": "VARCHAR", "id": "VARCHAR",
    "args": "JSON",
}


@dataclass
class TraceFile:
    """A trace split into its metadata members and a file holding its event array."""
    path: str
    form: str                      # object | array
    members: dict = field(default_factory=dict)
    piece_list: list = field(default_factory=list)   # files of the event array, in order
    truncated: bool = False
    content_bytes: int = 0
    hashing: object = None         # thread still hashing an uncompressed file, or None
    hasher: object = None          # the hashlib object the content goes to (the run's content_hash)
    array_start: int = 0           # byte offset of the event array's '[' in the content
    copier: object = None          # _PieceFeed still making the pieces, or None
    spans: list = None             # an uncompressed file: each piece's byte range in it
    workdir: str = None            # where its pieces (files or pipes) are made
    pipes: object = None           # _Pipes feeding the pieces to the load, or None
    inflating: bool = False        # the copier inflates a compressed file (and hashes it as it goes)
    memory: object = None          # _MemoryPieces holding the inflated pieces, or None (files)
    handed: list = field(default_factory=list)     # pieces handed to the load and not yet let go
    # how the load reads it (ingest/trace.py): ts and dur as 'double' or 'text'; the
    # pieces joined again (a cut fell inside an event); the --iterations-from name
    numbers: str = "double"
    rejoin: bool = False
    iteration_marker: str = None
    per_batch: int = 4             # pieces parsed at once (ingest/trace.py: one per DuckDB thread)
    piece_bytes: int = PIECE_BYTES  # the size the pieces were cut at

    def wait_hash(self):
        if self.copier is not None and self.inflating:
            self._wait_copier()        # a compressed file inflated while it loads is hashed as it goes
        if self.hashing is not None:
            self.hashing.join()
            error, self.hashing = self.hashing.error, None
            if error is not None:
                raise _hash_failed(self.path, error)

    @property
    def pieces(self):
        """Every piece (waits for the copy of an uncompressed file to end). Pieces held
        in memory are read once, as they come (iter_pieces): PiecesGone."""
        if self.memory is not None:
            raise PiecesGone()
        self._wait_copier()
        return self.piece_list

    def _wait_copier(self):
        if self.copier is not None:
            if self.memory is not None:
                self.memory.discard()     # only the hash is waited for (pieces held in memory are read once)
            self.piece_list, self.copier = self.copier.wait(), None

    @pieces.setter
    def pieces(self, paths):
        self.stop()
        self.piece_list = paths

    def iter_pieces(self):
        """The pieces in order, each as soon as it is whole (for an uncompressed file
        not yet copied, named pipes the kernel feeds from the file: _Pipes)."""
        if self.copier is not None and self.spans is not None and _Pipes.usable() and _Pipes.fit(self.workdir):
            self.stop_pipes()
            self.pipes = _Pipes(self.path, self.workdir, self.spans)
            yield from self.pipes.iter()
        else:
            if self.memory is not None and self.memory.let_go:
                raise PiecesGone()
            for path in (self.copier.iter() if self.copier is not None else self.piece_list):
                self.handed.append(path)
                yield path

    def settle(self):
        """The pieces handed out were read: their feeders' errors, if any; pieces held
        in memory are let go (the inflate goes on into the room they leave)."""
        if self.pipes is not None:
            self.pipes.settle()
        if self.memory is not None:
            self.memory.release(self.handed)
        self.handed = []

    def abandon_pipes(self):
        """DuckDB failed on the pipes: release their feeders; a feeder's own error
        (the file got shorter, a read error), if any, is the cause."""
        if self.pipes is not None:
            pipes, self.pipes = self.pipes, None
            pipes.abandon()

    def stop_pipes(self):
        if self.pipes is not None:
            self.pipes.stop()
            self.pipes = None

    def stop(self):
        """Stop copying pieces (the load ended: done, failed or rolled back)."""
        self.stop_pipes()
        if self.copier is not None:
            self.copier.stop()
            self.copier = None
        if self.memory is not None:
            self.memory.close()


def _skip(s, i):
    while i < len(s) and s[i] in _WS:
        i += 1
    return i


class DuplicateKey(ValueError):
    """A key written twice in the trace's top-level object (JSON allows it; which
    value counts is up to the reader, so tracedb refuses to guess)."""

    def __init__(self, key):
        super().__init__(key)
        self.key = key


def _duplicate(path, key):
    return IngestError(path, f"the top-level key {key!r} appears twice (duplicate JSON keys): readers disagree "
                             "on which one counts, so tracedb reads neither: remove one")


def _members(s, i, stop_key=None, seen=()):
    """Parse `"k": v, ...` of an object from s[i] on. Returns (members, i, stopped).

    Stops after the ':' of stop_key (stopped=True) or after the closing '}'.
    Raises ValueError (JSONDecodeError or IndexError) where the text ends or is not JSON.
    """
    out = {}
    while True:
        i = _skip(s, i)
        if s[i] == "}":
            return out, i + 1, False
        key, i = _DEC.raw_decode(s, i)
        if not isinstance(key, str):
            raise ValueError("object key is not a string")
        i = _skip(s, i)
        if s[i] != ":":
            raise ValueError("expected ':'")
        i = _skip(s, i + 1)
        if key in out or key in seen:
            raise DuplicateKey(key)
        if key == stop_key:
            return out, i, True
        out[key], i = _DEC.raw_decode(s, i)
        i = _skip(s, i)
        if s[i] == ",":
            i += 1
        elif s[i] != "}":
            raise ValueError("expected ',' or '}'")


def _prologue(path, buf, at_eof):
    """(form, members, byte offset of the event array's '[') from the start of a file."""
    s = buf.decode("utf-8", "surrogateescape")
    i = _skip(s, 0)
    if i >= len(s):
        raise IngestError(path, "file is empty")
    if s[i] == "[":
        return "array", {}, len(s[:i].encode("utf-8", "surrogateescape"))
    if s[i] != "{":
        raise IngestError(path, "not a trace: not JSON (expected '{' or '[' at the start)")
    try:
        members, j, stopped = _members(s, i + 1, stop_key="traceEvents")
    except DuplicateKey as e:
        raise _duplicate(path, e.key) from None
    except (ValueError, IndexError):
        if not at_eof:
            return None
        raise IngestError(path, "not a trace: the JSON object is malformed or cut off "
                                "before its traceEvents array") from None
    if not stopped:
        raise IngestError(path, "not a trace: JSON object without a traceEvents array")
    if j >= len(s) or s[j] != "[":
        raise IngestError(path, "not a trace: traceEvents is not an array")
    return "object", members, len(s[:j].encode("utf-8", "surrogateescape"))


def _epilogue(form, tail):
    """(index of the array's closing ']' in tail, members after it) or None if not closed."""
    s = tail.decode("utf-8", "surrogateescape")
    if form == "array":
        j = len(s.rstrip(_WS)) - 1
        return (len(s[:j].encode("utf-8", "surrogateescape")), {}) if j >= 0 and s[j] == "]" else None
    p = s.find("]")
    while p >= 0:
        i = _skip(s, p + 1)
        try:
            if i < len(s) and s[i] in ",}":
                members, k = ({}, i + 1) if s[i] == "}" else _members(s, i + 1, seen={"traceEvents"})[:2]
                if _skip(s, k) == len(s):
                    return len(s[:p].encode("utf-8", "surrogateescape")), members
        except DuplicateKey:
            if _skip(s, p + 1) == i and s[i:i + 1] == ",":     # right after the array: a second one
                raise
        except (ValueError, IndexError):
            pass
        p = s.find("]", p + 1)
    return None


def _hash_failed(path, error):
    """The IngestError for a hashing thread that died: a run must never carry the
    hash of a prefix of its file (duplicate detection would break)."""
    what = "out of memory" if isinstance(error, MemoryError) else (getattr(error, "strerror", None) or str(error))
    return IngestError(path, f"cannot hash the content ({what}); nothing was loaded")


class KeptThread(threading.Thread):
    """A daemon thread that keeps its value (.value) and exception (.error) for the one
    who joins it; result() joins it and gives the value, or raises the error."""

    def __init__(self, target, args):
        super().__init__(daemon=True)
        self.value = self.error = None
        self._work = (target, args)

    def run(self):
        try:
            self.value = self._work[0](*self._work[1])
        except BaseException as e:      # reported by wait_hash / _Hashing.__exit__ / result()
            self.error = e

    def result(self):
        self.join()
        if self.error is not None:
            raise self.error
        return self.value


def started(fn, *args):
    """fn(*args) begun at once in a KeptThread of its own."""
    t = KeptThread(fn, args)
    t.start()
    return t


def _drain(q, apply):
    """apply(item) to each item put on q until None; after a failure keep taking
    items (so the producer never blocks on a full queue) and raise it at the end."""
    failed = None
    while (item := q.get()) is not None:
        if failed is None:
            try:
                apply(item)
            except BaseException as e:
                failed = e
    if failed is not None:
        raise failed


class _Hashing:
    """Feeds a hashlib object from a worker thread (hashlib releases the GIL), so
    hashing a decompressed stream runs beside the decompression on a second core."""

    def __init__(self, hasher, path):
        self.q = queue.Queue(maxsize=4)
        self.path = path
        self.t = KeptThread(_drain, (self.q, hasher.update))

    def update(self, chunk):
        self.q.put(chunk)

    def __enter__(self):
        self.t.start()
        return self

    def __exit__(self, *exc):
        self.q.put(None)
        self.t.join()
        if self.t.error is not None and exc[0] is None:
            raise _hash_failed(self.path, self.t.error)


def _read_prologue(path, f, hasher):
    """Read from f until the event array's '[' is found: (form, members, buf, start, eof, cut)."""
    buf = b""
    while True:
        chunk = f.read(CHUNK)
        eof = not chunk
        buf += chunk
        if hasher:
            hasher.update(chunk)
        cut = problem(f) if eof else None
        try:
            layout = _prologue(path, buf, eof)
        except IngestError:
            if cut:
                raise IngestError(path, f"truncated: {cut}") from None
            raise
        except RecursionError:
            raise IngestError(path, "not a trace: a member before traceEvents is nested too deep") from None
        if layout is not None:
            return layout + (buf, eof, cut)
        if len(buf) > HEAD_MAX:
            raise IngestError(path, "not a trace: no traceEvents array in the first 64 MB")


def _cuts(fd, start, end, piece_bytes, first=(0, 0)):
    """Offsets of the commas to cut the array at, about piece_bytes apart, in
    [start, end - TAIL): each the first `},{` at or after its target. first: (n,
    bytes), the first n pieces about that many bytes instead (a small first batch)."""
    def step(k):
        return first[1] if k < first[0] and first[1] else piece_bytes
    out, pos = [], start + step(0)
    while pos < end - TAIL:
        window = os.pread(fd, min(CUT_WINDOW, end - TAIL - pos), pos)
        m = _CUT.search(window)
        if m is None:
            pos += len(window) or CUT_WINDOW
            continue
        comma = pos + window.index(b",", m.start())
        out.append(comma)
        pos = comma + step(len(out))
    return out


# copy_file_range fails across filesystems (tmpfs $TMPDIR: EXDEV) and on some
# kernels and filesystems, splice where a filesystem cannot (EINVAL): the bytes
# then go through user space, for the rest of the process.
_NO_KERNEL_COPY = {errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.EPERM}
_KERNEL_COPY = [hasattr(os, "copy_file_range")]
_KERNEL_SPLICE = [True]
STEP = 8 << 20             # bytes per call: a stop is seen between them


def _kernel_copy(src_fd, out_fd, n, pos):
    return os.copy_file_range(src_fd, out_fd, n, pos)


def _kernel_splice(src_fd, out_fd, n, pos):
    return os.splice(src_fd, out_fd, n, offset_src=pos)


def _write_all(fd, data):
    while data:
        data = data[os.write(fd, data):]


def _move(kernel, by_kernel, src_fd, out_fd, n, pos):
    """Up to n bytes of src from pos to out_fd, by kernel(...) while by_kernel[0]
    holds, else through user space; 0 at the end of src."""
    if by_kernel[0]:
        try:
            return kernel(src_fd, out_fd, n, pos)
        except OSError as e:
            if e.errno not in _NO_KERNEL_COPY:
                raise
            by_kernel[0] = False
    data = os.pread(src_fd, min(n, CHUNK), pos)
    _write_all(out_fd, data)
    return len(data)


def _write_piece(path, src_fd, out_fd, spans, k, kernel, by_kernel, stopped=lambda: False):
    """Piece k of an uncompressed file's event array into out_fd: '[' after a cut,
    the span's bytes (no bytes through Python where the kernel can), ']' before a cut."""
    pos, end = spans[k]
    if k:
        _write_all(out_fd, b"[")
    while pos < end and not stopped():
        n = _move(kernel, by_kernel, src_fd, out_fd, min(STEP, end - pos), pos)
        if n == 0:
            raise IngestError(path, "the file got shorter while it was being loaded")
        pos += n
    if k + 1 < len(spans) and not stopped():
        _write_all(out_fd, b"]")


def _piece_path(workdir, k):
    return os.path.join(workdir, f"events-{k:05d}.json")


class PiecesGone(Exception):
    """Pieces held in memory are read once and let go: what needs them again (another
    way of reading, a diagnosis) splits the file again into piece files (split with
    memory_pieces=None)."""


class _MemoryPieces:
    """The pieces of an inflated trace held in memory (a Linux memfd each, which
    DuckDB opens as /proc/self/fd/N) instead of written to files in $TMPDIR: on a disk
    that write cost about 1 s of CPU per GB in the kernel, on the inflating thread
    (docs/benchmarks.md). At most `limit` are held: the inflate waits for the room
    that the load leaves as it lets the pieces it has parsed go (release)."""

    @staticmethod
    def usable():
        return hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd")

    def __init__(self, limit):
        self.fds, self.let_go = {}, False
        self._room = threading.Semaphore(limit)
        self._discarding = False
        self._lock = threading.Lock()

    def create(self, k, stopped):
        """A new piece: (path, file open for writing), once there is room; None if
        stopped while waiting."""
        if self._discarding:
            self.close()
        while not self._discarding and not self._room.acquire(timeout=0.05):
            if stopped():
                return None
        fd = os.memfd_create(f"tracedb-piece-{k}", getattr(os, "MFD_CLOEXEC", 0))
        path = f"/proc/self/fd/{fd}"
        with self._lock:
            self.fds[path] = fd
        return path, os.fdopen(os.dup(fd), "wb")

    def discard(self):
        """Let every piece go as the next is made, without waiting for room: the load
        will read none of them (it waits for the inflate's hash alone)."""
        self._discarding = True
        self.close()

    def release(self, paths):
        for path in paths:
            with self._lock:
                fd = self.fds.pop(path, None)
            if fd is not None:
                os.close(fd)
                self.let_go = True
                self._room.release()

    def close(self):
        with self._lock:
            paths = list(self.fds)
        self.release(paths)


class _Pieces:
    """Writes the event array as numbered pieces ('[' + events + ']' each), files or
    held in memory (_MemoryPieces), through a thread: the kernel's copy overlaps the
    inflate of a gzip. on_closed(path) is called as each piece is closed."""

    def __init__(self, workdir, on_closed=lambda path: None, memory=None, stopped=lambda: False):
        self.workdir, self.paths, self.out, self.written = workdir, [], None, 0
        self._on_closed = on_closed
        self._memory, self._stopped = memory, stopped
        self._failed = False
        self._q = queue.Queue(maxsize=4)
        self._writer = KeptThread(_drain, (self._q, self._apply))
        self._writer.start()

    def _apply(self, op):
        try:
            op()
        except BaseException:
            self._failed = True       # no piece is published after this: the inflate must not wait for room
            raise

    def _do(self, op):
        self._q.put(op)

    def next(self):
        """Close the piece being written (published once the writer thread has it all)
        and start the next; False (nothing started) when stopped, or the writer failed,
        while waiting for room (closing then raises the writer's error)."""
        out, done = self.out, self.paths[-1] if self.paths else None
        if out is not None:
            self.out = None
            self._do(lambda: (out.write(b"]"), out.close(), self._on_closed(done)))
        if self._memory is not None:
            made = self._memory.create(len(self.paths), lambda: self._stopped() or self._failed)
            if made is None:
                return False
            path, new = made
        else:
            path = _piece_path(self.workdir, len(self.paths))
            new = open(path, "wb")
        self.paths.append(path)
        self.out = new
        self.written = 0
        if len(self.paths) > 1:
            self.write(b"[")
        return True

    def write(self, data):
        out = self.out
        self._do(lambda: out.write(data))
        self.written += len(data)

    def close(self, publish_last=True):
        """Close the last piece and wait for the writer (its error is raised)."""
        out, self.out = self.out, None
        if out is not None:
            last = self.paths[-1]
            self._do(lambda: (out.close(), publish_last and self._on_closed(last)))
        if self._writer.is_alive():
            self._q.put(None)
            self._writer.join()
            if self._writer.error is not None:
                raise self._writer.error

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        """Close what is open without publishing it (an error, or a stop, while
        splitting); the writer's own error only when there was none before."""
        try:
            self.close(publish_last=False)
        except Exception:
            if exc[0] is None:
                raise


class _PieceFeed:
    """Pieces made by a thread from the first use on, each published once whole
    ('[' + events + ']'): DuckDB parses a batch while the next is made (the copy of
    a 10 GB trace took 21 s before the parse began). work(publish, stopped) makes
    them, in order."""

    def __init__(self, work):
        self._work = work
        self.paths, self._done = [], False
        self._cv = threading.Condition()
        self._stop = threading.Event()
        self._thread = None

    def publish(self, path):
        with self._cv:
            self.paths.append(path)
            self._cv.notify_all()

    def _run(self):
        try:
            self._work(self.publish, self._stop.is_set)
        finally:
            with self._cv:
                self._done = True
                self._cv.notify_all()

    def _start(self):
        if self._thread is None:
            self._thread = KeptThread(self._run, ())
            self._thread.start()

    def _raise(self):
        if self._thread.error is not None:
            raise self._thread.error

    def iter(self):
        self._start()
        i = 0
        while True:
            with self._cv:
                while i >= len(self.paths) and not self._done:
                    self._cv.wait()
                if i >= len(self.paths):
                    break
                path = self.paths[i]
            i += 1
            yield path
        self._thread.join()
        self._raise()

    def wait(self):
        self._start()
        self._thread.join()
        self._raise()
        return self.paths

    def stop(self):
        """Stop making pieces; a feed never started still runs its work, which
        returns at once and releases what it holds (a hashing thread, the file)."""
        self._stop.set()
        self._start()
        self._thread.join()


# A pipe's buffer (Linux: 64 KB unless widened): each 64 KB DuckDB reads from a piece was
# a wakeup of its feeder thread and a turn of the GIL for it (16,000 for a 1 GB trace);
# widened to 1 MB (the unprivileged limit, /proc/sys/fs/pipe-max-size), 16x fewer.
# 0: left as it is.
PIPE_BYTES = 1 << 20


def _widen(fd):
    """The pipe's buffer widened to PIPE_BYTES where the system lets it (Linux's
    F_SETPIPE_SZ; refused beyond the user's pipe pages: then left as it is)."""
    if PIPE_BYTES:
        try:
            import fcntl
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        except (ImportError, AttributeError, OSError):
            pass


class _Pipes:
    """The pieces of an uncompressed file as named pipes, each fed by a thread with
    the kernel's splice from the file (page cache) as DuckDB reads it: nothing is
    written to disk. Copying a 10 GB trace into piece files slowed the first third
    of its parse (docs/benchmarks.md). A pipe is made when the load asks for it.

    The file is opened once, here (a file renamed or replaced meanwhile is still the
    one that was split); a feeder opens its pipe before anything can fail, so DuckDB,
    waiting to open it, always gets at least an end of file (then an error: settle)."""
    @staticmethod
    @functools.cache
    def usable():
        return hasattr(os, "mkfifo") and hasattr(os, "splice") and hasattr(signal, "pthread_sigmask")

    @staticmethod
    def fit(workdir):
        """Whether workdir's filesystem holds named pipes (vfat, some FUSE ones do not:
        the pieces are then copied into files)."""
        probe = os.path.join(workdir, "pipe-probe")
        try:
            os.mkfifo(probe, 0o600)
        except OSError:
            return False
        os.unlink(probe)
        return True

    def __init__(self, path, workdir, spans):
        self.workdir, self.spans = workdir, spans
        self.live, self.stopped = [], False
        self.path, self.src = path, os.open(path, os.O_RDONLY)

    def iter(self):
        for k in range(len(self.spans)):
            self._reap()
            pipe = os.path.join(self.workdir, f"pipe-{k:05d}.json")
            Path(pipe).unlink(missing_ok=True)
            os.mkfifo(pipe, 0o600)
            t = KeptThread(self._feed, (pipe, k))
            self.live.append((pipe, t))
            t.start()
            yield pipe

    def settle(self):
        """After DuckDB read every pipe handed out: wait for their feeders; raise
        a feeder's error."""
        self._reap(wait=True)

    def _reap(self, wait=False):
        """Forget the pipes fed whole; raise a feeder's error."""
        for pipe, t in list(self.live):
            if wait:
                t.join()
            if not t.is_alive():
                self.live.remove((pipe, t))
                Path(pipe).unlink(missing_ok=True)
                if t.error is not None:
                    raise t.error

    def abandon(self):
        """stop(), then raise the first feeder's own error (not the broken pipe a
        failed DuckDB left it): it can end just after DuckDB saw its pipe's end."""
        threads = [t for _, t in self.live]
        self.stop()
        for t in threads:
            if t.error is not None and not isinstance(t.error, BrokenPipeError):
                raise t.error

    def _feed(self, pipe, k):
        # signals are the main thread's; an early close by DuckDB is EPIPE here, not SIGPIPE
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGPIPE, signal.SIGINT, signal.SIGTERM})
        out = os.open(pipe, os.O_WRONLY)         # waits for the reader
        try:
            _widen(out)
            _write_piece(self.path, self.src, out, self.spans, k, _kernel_splice, _KERNEL_SPLICE,
                         lambda: self.stopped)
        finally:
            os.close(out)

    def stop(self):
        """Release every feeder: one still waiting for its reader, or blocked on a
        pipe nobody reads any more (a failed load), gets a reader that drains it."""
        self.stopped = True
        try:
            while self.live:
                pipe, t = self.live[-1]
                if t.is_alive():
                    fd = os.open(pipe, os.O_RDONLY | os.O_NONBLOCK)
                    try:
                        while t.is_alive():
                            try:
                                os.read(fd, 1 << 20)
                            except BlockingIOError:
                                pass
                            t.join(0.01)
                    finally:
                        os.close(fd)
                self.live.pop()
                Path(pipe).unlink(missing_ok=True)
        finally:
            if self.src is not None:
                os.close(self.src)
                self.src = None


def _copier(path, workdir, spans):
    """A _PieceFeed copying the spans (byte ranges) of an uncompressed file."""
    def work(publish, stopped):
        with open(path, "rb") as src:
            for k in range(len(spans)):
                if stopped():
                    return
                piece = _piece_path(workdir, k)
                with open(piece, "wb") as out:
                    _write_piece(path, src.fileno(), out.fileno(), spans, k, _kernel_copy, _KERNEL_COPY)
                publish(piece)
    return _PieceFeed(work)


class _PlainHash:
    """Hashes an uncompressed file on a thread of the lowest priority: it runs in the
    gaps DuckDB's threads leave (1 GB on two cores: 8.2 s in all against 8.5 s at
    normal priority, docs/benchmarks.md). Whoever needs the digest (join) hashes the
    rest itself at its own priority, after the thread's current 1 MB chunk."""

    CHUNK = 1 << 20     # what join waits for the thread to finish: 1 MB (as fast as 8 or 16 MB here)

    def __init__(self, path, hasher):
        self.hasher, self.error = hasher, None
        self.file = open(path, "rb")
        self.hurry = threading.Event()
        self.thread = KeptThread(self._hash, (True,))
        self.thread.start()

    def _hash(self, background):
        if background and sys.platform == "linux":        # a thread's id names that thread alone on Linux only
            try:
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
            except Exception:      # noqa: BLE001 (a lower priority is only a nicety)
                pass
        while not (background and self.hurry.is_set()):
            if not (chunk := self.file.read(self.CHUNK)):
                self.file.close()        # whole (a failed load never joins: the thread ends it)
                return
            self.hasher.update(chunk)

    def join(self):
        """Wait for the digest: the thread stops after its chunk, the rest is read here."""
        self.hurry.set()
        self.thread.join()
        self.error = self.thread.error
        try:
            if self.error is None and not self.file.closed:
                self._hash(False)
        except OSError as e:
            self.error = e
        finally:
            self.file.close()


def split(path, workdir, hasher, piece_bytes=None, memory_pieces=None, first=(0, 0)):
    """Copy the event array of the trace at path into pieces in workdir; parse what surrounds it.

    hasher (hashlib object) receives the whole decompressed content. For an
    uncompressed file the hashing may still run when this returns (it overlaps
    the parse): call TraceFile.wait_hash() before reading the digest; and its
    pieces are copied by a thread from their first use on (TraceFile.iter_pieces).
    memory_pieces: a compressed file inflated while it loads keeps at most that many
    pieces in memory (where it can: _MemoryPieces), each let go once the load has
    read it (TraceFile.settle); None: piece files in workdir, kept to the end.
    first: (n, bytes), an uncompressed file's first n pieces cut about that size
    instead (the load's first batch, which nothing overlaps, made small).
    """
    piece_bytes = piece_bytes or PIECE_BYTES
    size = os.path.getsize(path)
    try:
        f = open_bytes(path)
    except OSError as e:
        raise IngestError(path, f"cannot open ({e})") from None
    if not hasattr(f, "fileobj"):
        with f:
            tf = _split_plain(path, f, size, workdir, hasher, piece_bytes, first)
    else:
        tf = _split_compressed(path, f, size, workdir, hasher, piece_bytes, memory_pieces)
    tf.hasher, tf.piece_bytes = hasher, piece_bytes
    return tf


def _split_compressed(path, f, size, workdir, hasher, piece_bytes, memory_pieces=None):
    """A compressed file: inflated (pyarrow) and cut into pieces as it comes. When
    the prologue gives the base time (Kineto writes it before the events), a thread
    does it while the load parses the pieces already whole; the content's size and
    hash and the members after the array are known once it ends (an object cut off
    is then an error: a bare array, which may be loaded cut off, has no prologue)."""
    h = _Hashing(hasher, path).__enter__()
    try:
        form, members, start, buf, eof, cut = _read_prologue(path, f, h)
    except BaseException:
        h.__exit__(*sys.exc_info())
        f.close()
        raise
    tf = TraceFile(path=str(path), form=form, members=members, array_start=start, content_bytes=None)

    def work(publish, stopped, at=lambda n: None):
        failed = True
        try:
            with f:
                _inflate_pieces(tf, f, h, buf, eof, cut, workdir, piece_bytes, publish, stopped, at)
            failed = False
        finally:
            h.__exit__(*((RuntimeError, None, None) if failed else (None, None, None)))

    if "baseTimeNanoseconds" in members:
        tf.copier, tf.inflating = _PieceFeed(work), True
        if memory_pieces and _MemoryPieces.usable():
            tf.memory = _MemoryPieces(memory_pieces)
        return tf
    with byte_bar(path, size) as at:
        work(tf.piece_list.append, lambda: False, at)
    return tf


def _inflate_pieces(tf, f, h, buf, eof, cut, workdir, piece_bytes, publish, stopped, at):
    """The cut loop of a compressed stream: pieces written by a thread (_Pieces),
    each published once closed; the last one once the end of the array is known."""
    start = tf.array_start
    with _Pieces(workdir, on_closed=publish, memory=tf.memory, stopped=stopped) as pieces:
        if not pieces.next():
            return
        hold = buf[start:]          # not yet written: the last TAIL bytes are never cut
        written = len(hold)
        while True:
            if len(hold) > TAIL:     # (views, not copies: the writer thread takes them as they are)
                view = memoryview(hold)
                data, hold = view[:-TAIL], bytes(view[-TAIL:])
                while pieces.written + len(data) >= piece_bytes:
                    m = _CUT.search(data, max(0, piece_bytes - pieces.written))
                    if m is None:
                        break
                    comma = m.start() + m.group().index(b",")
                    pieces.write(data[:comma])
                    if not pieces.next():
                        return
                    data = data[comma + 1:]
                pieces.write(data)
            if eof or stopped():
                break
            chunk = f.read(CHUNK)
            if not chunk:
                cut = problem(f)
                break
            h.update(chunk)
            hold += chunk
            written += len(chunk)
            at(f.raw_tell())
        if stopped():
            return
        pieces.write(hold)
        pieces.close(publish_last=False)
    last = pieces.paths[-1]
    with open(last, "rb") as g:
        g.seek(max(0, pieces.written - TAIL))
        tail = g.read()
    end = _end_of_array(tf.path, tf.form, tail)
    tf.content_bytes = start + written
    if end is not None:
        os.truncate(last, pieces.written - len(tail) + end[0] + 1)
    _ended(tf, end, cut)
    publish(last)


def _split_plain(path, f, size, workdir, hasher, piece_bytes, first=(0, 0)):
    """An uncompressed file: its prologue and epilogue read in place, the cuts found
    with a few reads near each, the copy left to a _Copier (while a thread hashes
    the whole file)."""
    form, members, start, _, _, cut = _read_prologue(path, f, None)
    hashing = _PlainHash(path, hasher)
    fd = f.fileno()
    n = min(TAIL, size - start)
    tail = os.pread(fd, n, size - n)
    end = _end_of_array(path, form, tail)
    last = size if end is None else size - n + end[0] + 1        # the ']' kept
    bounds = [start] + [c + 1 for c in _cuts(fd, start, size, piece_bytes, first)]
    spans = [(pos, bounds[k + 1] - 1 if k + 1 < len(bounds) else last) for k, pos in enumerate(bounds)]
    tf = TraceFile(path=str(path), form=form, members=members, content_bytes=size, hashing=hashing,
                   array_start=start, copier=_copier(path, workdir, spans), spans=spans,
                   workdir=workdir)
    return _ended(tf, end, cut)


def _end_of_array(path, form, tail):
    try:
        return _epilogue(form, tail)
    except DuplicateKey as e:
        raise _duplicate(path, e.key) from None
    except RecursionError:
        raise IngestError(path, "a member after traceEvents is nested too deep") from None


def _ended(tf, end, cut):
    """tf, with what the end of its content says: cut off (an error for an object
    trace; a bare array is loaded up to its last whole event), or the members after
    the array."""
    if end is None:
        if tf.form == "object":
            raise IngestError(tf.path, f"truncated: {cut or 'the traceEvents array is not closed'}")
        tf.truncated = True
        if cut:
            warnings.warn(f"{tf.path}: {cut}; the events before that point were kept")
    else:
        if cut:     # e.g. a gzip without its trailer: the JSON closes, so the content is whole
            warnings.warn(f"{tf.path}: {cut}, but the JSON is complete; loaded as it is")
        for k, v in end[1].items():
            if k in tf.members:
                raise _duplicate(tf.path, k)
            tf.members[k] = v
    return tf


def join_pieces(tf, workdir):
    """The pieces of tf as one array file (when a cut fell inside an event)."""
    path = os.path.join(workdir, "events-joined.json")
    with open(path, "wb") as out:
        for chunk in _joined_chunks(tf.pieces):
            out.write(chunk)
    tf.pieces = [path]
    return tf


def _text(v):
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, decimal.Decimal)):
        return str(v)
    return json.dumps(v, separators=(",", ":"), default=float)


def _joined_chunks(pieces):
    """The bytes of the original event array from its pieces (the brackets added at
    the cuts taken out again), in chunks."""
    for k, piece in enumerate(pieces):
        with open(piece, "rb") as f:
            if k:
                f.seek(1)                        # the '[' added at the cut
                yield b","
            left = os.fstat(f.fileno()).st_size - f.tell() - (k + 1 < len(pieces))   # the ']' added
            while left > 0 and (chunk := f.read(min(CHUNK, left))):
                left -= len(chunk)
                yield chunk


_NOT_UTF8 = re.compile("[\udc80-\udcff]")      # how surrogateescape decodes a byte that is not UTF-8


def exact_batches(tf, batch_rows=65536):
    """Stream the event array element by element into Arrow batches (numbers as text).

    A cut-off array ends at its last complete event.
    """
    dec = json.JSONDecoder(parse_float=decimal.Decimal)
    schema = pa.schema([(k, pa.string()) for k in RAW_COLUMNS])
    cols = {k: [] for k in RAW_COLUMNS}

    def flush():
        try:
            batch = pa.record_batch([pa.array(cols[k], pa.string()) for k in RAW_COLUMNS], schema=schema)
        except UnicodeEncodeError:      # an escape of half a UTF-16 pair ("\udc80"): no text
            raise IngestError(tf.path, "malformed trace: a string holds a lone UTF-16 surrogate "
                                       "(a \\uD800-\\uDFFF escape without its pair)") from None
        for v in cols.values():
            v.clear()
        return batch

    chunks = _joined_chunks(tf.pieces)
    s, pos, eof, n = "", 0, False, 0
    dropped = 0                       # bytes of the array before s[0]
    # incremental: a character whose bytes a chunk's end splits is decoded whole
    # (chunk by chunk, its halves read as bytes that are not UTF-8)
    utf8 = codecs.getincrementaldecoder("utf-8")("surrogateescape")

    def more():
        nonlocal s, pos, eof, dropped
        chunk = next(chunks, b"")
        eof = not chunk
        dropped += len(s[:pos].encode("utf-8", "surrogateescape"))
        s = s[pos:] + utf8.decode(chunk, final=eof)
        pos = 0

    def at(i):
        """Byte offset of s[i] in the content (the user's file, decompressed)."""
        return tf.array_start + dropped + len(s[:i].encode("utf-8", "surrogateescape"))

    more()
    pos = _skip(s, pos) + 1          # past '['
    while True:
        pos = _skip(s, pos)
        while pos >= len(s) and not eof:
            more()
            pos = _skip(s, pos)
        if pos >= len(s):
            break                     # cut off between events
        if s[pos] == "]":
            break
        if s[pos] == ",":
            pos += 1
            continue
        try:
            ev, end = dec.raw_decode(s, pos)
        except json.JSONDecodeError as e:
            if eof:
                if tf.truncated:
                    break
                raise IngestError(tf.path, f"malformed JSON in event {n} at byte {at(e.pos)} of the "
                                           f"content: {e.msg}") from None
            more()
            continue
        except RecursionError:
            raise IngestError(tf.path, f"event {n} (at byte {at(pos)}) is nested too deep") from None
        if not isinstance(ev, dict):
            raise IngestError(tf.path, f"malformed trace: event {n} (at byte {at(pos)} of the content) "
                                       "is not an object")
        if bad := _NOT_UTF8.search(s, pos, end):      # bytes that are not UTF-8 (surrogateescape's)
            raise IngestError(tf.path, f"malformed trace: event {n} has bytes that are not UTF-8 "
                                       f"(at byte {at(bad.start())} of the content)")
        pos, n = end, n + 1
        for k in RAW_COLUMNS:
            v = ev.get(k)
            # args as DuckDB's reader writes them (UTF-8, not \u escapes), so a lone
            # surrogate in them is found here as in any other string (flush)
            cols[k].append(json.dumps(v, separators=(",", ":"), default=float, ensure_ascii=False)
                           if k == "args" and v is not None else _text(v))
        if len(cols["ph"]) >= batch_rows:
            yield flush()
    if cols["ph"]:
        yield flush()
