"""Many traces at once (a directory of rank traces): every core works across files.

Each trace is loaded by the same ingest_file as one file is, in a thread of this
process, on a cursor of its own (a connection to the target's database: a transaction
of its own), straight into the target: its rows are inserted once, and the DuckDB
threads, the memory cap and the block pool are the target's, shared by the files at
work (each statement's tasks on DuckDB's threads: the parse of one file beside the
derivation of another). Until 2026-11 each file went to a worker process that loaded
it into a database in memory, whose rows the parent inserted again: every row
inserted twice, a process spawned, imported and given a schema per worker (8 rank
traces, 1.09 GB, 16 cores: 5.3-6.9 s and 56 CPU-s, against 25-27 CPU-s for one 1.07
GB file; docs/benchmarks.md). The settings one ingest sets for its load (DuckDB's
memory cap, zstd for a database made before args were declared so) are DuckDB's, not
a cursor's: they are set here once, around all the files, and each ingest leaves a
setting it finds set alone. What one ingest decides against the database alone -- the
run's name (`name~2`), that its content is new (a duplicate is skipped), that its rank
is free -- ingest/__init__.py decides against the runs committed so far and the names
claimed by the ingests under way, the checks and the commit one ingest at a time. A
file that fails is reported in one line and leaves nothing behind; the others go on.
Files that pair with a trace (ncu reports, power logs) are not handled here: the
caller loads them after.

How many at once: `jobs` files (default: one a core), of which only
as many as fit in STAGED_BYTES of JSON together (one at least) parse and insert their
events at a time (ingest/trace.py enters _Staging around that): a file staging holds up
to two batches of its events as Arrow beside DuckDB's memory, which the others, linking
their kernels, launches and ops, work in. The peak RSS is DuckDB's memory cap plus what
the files staging hold.
"""
import os
import signal
import threading
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from contextlib import ExitStack, contextmanager, nullcontext

from ..progress import file_bar, phase
from ..store.sql import scalar
from ..store.tuning import asof_by_sort, memory_cap
from .errors import IngestError
from .workers import usable_cores

# JSON of the files parsing and inserting their events at once (a larger file alone):
# at 16 cores one 1 GB trace holds two batches of 192 MB as Arrow at its peak beside
# DuckDB's 1 GiB (1.36-1.40 GB, ingest/trace.py), and two rank traces of 136 MB as much.
# Four at once, not held back: 1.69-1.74 GB (docs/benchmarks.md).
STAGED_BYTES = 384 << 20
# Files at once when the caller names no number (0: one a core). On 2 cores two at once
# took 0.76-0.94x the time of one at a time (8 traces of 136 MB, three same-run rounds):
# one file's ingest keeps 1.2 of the 2 busy.
FILES_AT_ONCE = 0
# What a compressed trace of unknown content size is counted as, times its size
# (Kineto's JSON in xz or gzip is 8-15x smaller).
COMPRESSED_RATIO = 10


class _Stopped(Exception):
    """The folder's ingest was stopped (Ctrl-C) while this file waited to stage."""


class _Staging:
    """The files staging their events (parsed to Arrow, inserted), no more than
    STAGED_BYTES of JSON together, one at least: of(nbytes) is what a file's ingest
    enters around that (ingest/trace.py), as often as it loads them."""

    def __init__(self, budget):
        self.budget, self.held, self.stopped = budget, 0, False
        self.turn = threading.Condition()

    def of(self, nbytes):
        return _Held(self, min(nbytes, self.budget))

    def stop(self):
        with self.turn:
            self.stopped = True
            self.turn.notify_all()


class _Held:
    def __init__(self, staging, nbytes):
        self.staging, self.nbytes = staging, nbytes

    def __enter__(self):
        s = self.staging
        with phase("folder: waited to stage"), s.turn:
            while not s.stopped and s.held and s.held + self.nbytes > s.budget:
                s.turn.wait()
            if s.stopped:
                raise _Stopped()
            s.held += self.nbytes

    def __exit__(self, *exc):
        s = self.staging
        with s.turn:
            s.held -= self.nbytes
            s.turn.notify_all()


def _content_bytes(path):
    """About how many bytes of JSON the file holds (what it stages is in proportion):
    its size; a gzip's own count of its content (the trailer's, modulo 4 GiB); xz
    COMPRESSED_RATIO times its size."""
    from .source import compression
    size = _size(path)
    try:
        kind = compression(path)
        if kind == "gzip" and size >= 18:
            with open(path, "rb") as f:
                f.seek(-4, os.SEEK_END)
                return max(size, int.from_bytes(f.read(4), "little"))
    except (IngestError, OSError):     # reported by its ingest
        return size
    return size * COMPRESSED_RATIO if kind else size


def _size(path):
    """The file's size, 0 where it cannot be read (gone, unreadable: its ingest says so)."""
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _out_of_memory(result):
    """A file that failed for want of DuckDB's memory (shared by the files at once)."""
    return isinstance(result, tuple) and "Out of Memory" in result[1]


def _whole(path):
    """True for a trace whose ingest does not stage its events in Arrow batches (an
    Nsight Systems export, read by processes of its own): it loads alone, taking the
    whole of STAGED_BYTES."""
    from .registry import detect
    from .trace import TraceReader
    try:
        return not isinstance(detect(path)[0], TraceReader)
    except IngestError:                # said by its ingest
        return False


def _one(con, path, options, staging):
    """One trace into the target on con (a cursor of its own): (result or (path, error),
    its events)."""
    from . import ingest_file
    try:
        with staging.of(staging.budget) if _whole(path) else nullcontext():
            r = ingest_file(con, path, options=options)
    except IngestError as e:
        return (path, str(e)), 0
    events = scalar(con, "SELECT n_events FROM runs WHERE run = ?", [r.run]) if r.status == "loaded" else 0
    return r, events or 0


def ingest_traces(con, items, jobs=None, options=None, report=print):
    """Ingest trace files into the database behind con, `jobs` at once (default: one
    a core), as many staging their events as fit in STAGED_BYTES;
    items are paths or (path, options of that file) pairs; report(result or (path,
    error)) per file as it lands, in this thread. A file that ran out of DuckDB's memory
    cap beside others (the cap is the database's, shared by the files at work) is
    loaded again alone once they are done, and reported then. Returns the number of
    files that failed."""
    from . import _args_in_zstd
    items = [(str(i), {}) if not isinstance(i, tuple) else (str(i[0]), i[1]) for i in items]
    sizes = {p: _size(p) for p, _ in items}          # (the progress bar's MB/s)
    at_once = max(1, min(jobs or FILES_AT_ONCE or usable_cores(), len(items)))
    staging = _Staging(STAGED_BYTES)
    todo = list(reversed(items))          # popped from the end: in the order given
    again, alone = [], False              # out of memory beside others: alone, after them
    failed = 0
    running = {}                          # future -> (item, cursor)
    held = ExitStack()                    # Ctrl-C held back while the files stop (below)
    with held, ExitStack() as stack:
        # DuckDB's settings for a load, once for all (each ingest leaves them as found)
        stack.enter_context(memory_cap(con))
        stack.enter_context(_args_in_zstd(con))
        at = stack.enter_context(file_bar(len(items)))     # (no spinner per file under it)
        pool = stack.enter_context(ThreadPoolExecutor(at_once, thread_name_prefix="tracedb-ingest"))
        try:
            while todo or running or again:
                if not todo and not running:             # the others done: one at a time
                    todo, again, alone, at_once = list(reversed(again)), [], True, 1
                while todo and len(running) < at_once:
                    item = todo.pop()
                    path, own = item
                    cur = con.cursor()
                    asof_by_sort(cur)          # as db.connect sets on a connection (a session setting)
                    own = {**(options or {}), **own, "beside_others": len(items) > 1,
                           "staging": staging.of(_content_bytes(path))}
                    running[pool.submit(_one, cur, path, own, staging)] = (item, cur)
                with phase("folder: files waited for"):
                    done, _ = wait(list(running), return_when=FIRST_COMPLETED)
                for fut in done:
                    item, cur = running.pop(fut)
                    cur.close()
                    result, events = fut.result()
                    if not alone and len(items) > 1 and _out_of_memory(result):
                        again.append(item)
                        continue
                    failed += isinstance(result, tuple)
                    report(result)
                    at(sizes[item[0]], events)
        except BaseException:             # Ctrl-C, SIGTERM: every file under way stops, rolled back
            held.enter_context(_signals_held())
            staging.stop()
            _stop(running, report)
            raise
    return failed


@contextmanager
def _signals_held():
    """SIGINT and SIGTERM ignored (a handler is the main thread's to set) until the files
    under way have stopped and the database's settings are back: a second Ctrl-C there
    met the connection busy, or ended the process with threads inside DuckDB."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    old = {s: h for s, h in old.items() if h is not None}       # (None: not set from Python)
    for s in old:
        signal.signal(s, signal.SIG_IGN)
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def _stop(running, report):
    """Interrupt every file under way until all have ended (again and again: an
    interrupt between two statements is lost), and close their cursors before the
    database's settings are put back; a further Ctrl-C meanwhile does not cut this
    short (threads left inside DuckDB at exit abort the interpreter). A file that
    committed before its interrupt is reported."""
    while running:
        try:
            for _, cur in running.values():
                cur.interrupt()
            done, _ = wait(list(running), timeout=0.05)
            for fut in done:
                running.pop(fut)[1].close()
                if fut.exception() is None and not isinstance(fut.result()[0], tuple):
                    report(fut.result()[0])
        except KeyboardInterrupt:
            continue
