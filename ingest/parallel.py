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

How many at once: `jobs` files (default: one per CORES_PER_FILE cores), no more than fit in
STAGED_BYTES of JSON together (at least one): each ingest holds up to two batches of
its events as Arrow (one inserted, the next parsed) beside DuckDB's memory, and the
peak RSS is that memory cap plus what all of them hold.
"""
import os
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from contextlib import ExitStack

from ..progress import file_bar, phase
from ..store.sql import scalar
from ..store.tuning import asof_by_sort, memory_cap
from .errors import IngestError

# JSON of the files loaded at once, together (a file larger than this alone): at 16
# cores a 1 GB trace holds two batches of 192 MB as Arrow at its peak (ingest/trace.py)
# beside DuckDB's 1 GiB; files of 136 MB are held whole (two batches: 64 MB, then the
# rest), so four of them stay under that.
STAGED_BYTES = 576 << 20
# Files at once when the caller names no number (0: one per CORES_PER_FILE cores). One
# ingest keeps 3-10 cores busy by phase (docs/benchmarks.md, the 1 GB trace at 16
# cores); on 2 cores one at a time was as fast as two, with less CPU and memory.
FILES_AT_ONCE = 0
CORES_PER_FILE = 4


def _cores():
    """The cores this process may run on (taskset, a cpuset), else the machine's."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


# What a compressed trace of unknown content size is counted as, times its size
# (Kineto's JSON in xz or gzip is 8-15x smaller).
COMPRESSED_RATIO = 10


def _content_bytes(path):
    """About how many bytes of JSON the file holds (what it stages is in proportion):
    its size; a gzip's own count of its content (the trailer's, modulo 4 GiB); xz
    COMPRESSED_RATIO times its size."""
    from .source import compression
    size = os.path.getsize(path)
    try:
        kind = compression(path)
        if kind == "gzip" and size >= 18:
            with open(path, "rb") as f:
                f.seek(-4, os.SEEK_END)
                return max(size, int.from_bytes(f.read(4), "little"))
    except (IngestError, OSError):     # reported by its ingest
        return size
    return size * COMPRESSED_RATIO if kind else size


def _one(con, path, options):
    """One trace into the target on con (a cursor of its own): (result or (path, error),
    its events)."""
    from . import ingest_file
    try:
        r = ingest_file(con, path, options=options)
    except IngestError as e:
        return (path, str(e)), 0
    events = scalar(con, "SELECT n_events FROM runs WHERE run = ?", [r.run]) if r.status == "loaded" else 0
    return r, events or 0


def ingest_traces(con, items, jobs=None, options=None, report=print):
    """Ingest trace files into the database behind con, `jobs` at once (default: one
    per CORES_PER_FILE cores), as many as fit in STAGED_BYTES; items are paths or
    (path, options of that file) pairs; report(result or (path, error)) per file as
    it lands, in this thread. Returns the number of files that failed."""
    from . import _args_in_zstd
    items = [(str(i), {}) if not isinstance(i, tuple) else (str(i[0]), i[1]) for i in items]
    sizes = {p: os.path.getsize(p) for p, _ in items}          # (the progress bar's MB/s)
    content = {p: _content_bytes(p) for p, _ in items}
    at_once = max(1, min(jobs or FILES_AT_ONCE or _cores() // CORES_PER_FILE, len(items)))
    todo = list(reversed(items))          # popped from the end: in the order given
    failed = 0
    running = {}                          # future -> (path, cursor)
    with ExitStack() as stack:
        # DuckDB's settings for a load, once for all (each ingest leaves them as found)
        stack.enter_context(memory_cap(con))
        stack.enter_context(_args_in_zstd(con))
        at = stack.enter_context(file_bar(len(items)))     # (no spinner per file under it)
        pool = stack.enter_context(ThreadPoolExecutor(at_once, thread_name_prefix="tracedb-ingest"))
        try:
            while todo or running:
                held = sum(content[p] for p, _ in running.values())
                while todo and len(running) < at_once and (not running or held + content[todo[-1][0]] <= STAGED_BYTES):
                    path, own = todo.pop()
                    cur = con.cursor()
                    asof_by_sort(cur)          # as db.connect sets on a connection (a session setting)
                    own = {**(options or {}), **own, "beside_others": len(items) > 1}
                    running[pool.submit(_one, cur, path, own)] = (path, cur)
                    held += content[path]
                with phase("folder: files waited for"):
                    done, _ = wait(list(running), return_when=FIRST_COMPLETED)
                for fut in done:
                    path, cur = running.pop(fut)
                    cur.close()
                    result, events = fut.result()
                    failed += isinstance(result, tuple)
                    report(result)
                    at(sizes[path], events)
        except BaseException:             # Ctrl-C, SIGTERM: every file under way stops, rolled back
            while running:               # (again and again: an interrupt between two statements is lost)
                for _, cur in running.values():
                    cur.interrupt()
                done, _ = wait(list(running), timeout=0.05)
                for fut in done:
                    running.pop(fut)[1].close()
            raise
    return failed
