"""Where the critical path's reports over many iterations (iteration=all, a job's) run
in worker processes, and the workers' connections: each worker builds and walks the
graphs of a chunk of iterations (critpath._in_worker) and returns its rows as Arrow,
which the parent joins in iteration order (critpath.graphs() builds them in one
process, holding Python's lock: about 2 cores whatever the machine has).

Used where the machine has cores for it (workers(); TRACEDB_CRITPATH_WORKERS=N, 0 or 1:
the one process) and the database is a file opened read-only (a write connection holds
DuckDB's lock on it, and an in-memory one is this process's alone): each worker opens it
read-only with store/db.py connect, sandboxed as the parent's connection is. The rows
are those of the one process, in its order (tests/test_critical_path_all.py)."""
import itertools
import os
import warnings
from concurrent.futures.process import BrokenProcessPool

import duckdb

from ..ingest.workers import each_in_workers, spawnable, usable_cores
from ..store import db, sandbox
from ..store.sql import rows


def _memory_bytes():
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):
        return None


# A worker's peak memory, at most: one holds a chunk's rows and graphs (the 1 GB trace
# in chunks of 50 iterations: 1.1 GB; of 20: 0.65 GB; docs/benchmarks.md).
WORKER_BYTES = 2 << 30


def _default_workers():
    """None on a machine of few cores (graphs() already overlaps the next chunk's SQL
    with this chunk's graphs on 2 cores), else one a core but this process's, at most
    8, and one for each WORKER_BYTES of the machine's memory."""
    cores = usable_cores()
    if cores < 4:
        return 0
    memory = _memory_bytes()
    return min(8, cores - 1, 8 if memory is None else memory // WORKER_BYTES)


def workers():
    """Worker processes for a report over many iterations (0: this process);
    TRACEDB_CRITPATH_WORKERS=N sets their number."""
    return max(0, min(32, int(os.environ.get("TRACEDB_CRITPATH_WORKERS", "") or _default_workers())))


# Iterations a worker's chunk holds at least (each window also reads the iteration
# before and a second after the chunk: about 10 iterations of the 1 GB trace), and
# a report's iterations below which starting the workers costs more than they save.
MIN_CHUNK = 10
MIN_ITERATIONS = 30
AHEAD = 2          # chunks a worker under way or waiting, at most (each_in_workers)


def source(con):
    """(path, sandboxed, threads) of con's database where a worker can open it: a
    file con opened read-only. None otherwise."""
    try:
        got = rows(con, "SELECT path, readonly FROM duckdb_databases() WHERE database_name = current_database()")
        external, threads = rows(con, "SELECT current_setting('enable_external_access'), "
                                      "current_setting('threads')")[0]
    except duckdb.Error:
        return None
    if not got or got[0][0] is None or not got[0][1] or not os.path.isfile(got[0][0]):
        return None
    return got[0][0], not external, threads


def plan(con, its, chunk_iterations, n=None):
    """(source, chunks, workers) to compute its ((run, job, iteration) of
    critpath.iterations) in workers: chunks (run, job, iterations) in its order, each
    of consecutive iterations of one run or job, at most chunk_iterations. None: in
    this process (too few workers, iterations or chunks, or a database a worker
    cannot open)."""
    n = workers() if n is None else n
    if n < 2 or len(its) < MIN_ITERATIONS or not spawnable():
        return None
    src = source(con)
    if src is None:
        return None
    chunks = []
    for (run, job), group in itertools.groupby(its, key=lambda x: (x[0], x[1])):
        group = [it for _, _, it in group]
        size = min(chunk_iterations, max(MIN_CHUNK, -(-len(group) // n)))
        chunks += [(run, job, tuple(group[k:k + size])) for k in range(0, len(group), size)]
    if len(chunks) < 2:
        return None
    n = min(n, len(chunks))
    path, sandboxed, threads = src
    return (path, sandboxed, max(1, threads // n)), chunks, n


def in_workers(fn, chunks, n, here):
    """[fn(chunk) for chunk in chunks], in n workers, a few chunks at a time (AHEAD);
    here() instead, in this process, where a worker ended abruptly (killed for its
    memory: the pool is then broken), with a warning."""
    try:
        return list(each_in_workers(fn, chunks, n, ahead=AHEAD))
    except BrokenProcessPool:
        warnings.warn(f"a worker process of the critical path ended abruptly (out of memory?): its {len(chunks)} "
                      "chunks computed again in this process (TRACEDB_CRITPATH_WORKERS=0 skips the workers)")
        return here()


# ---- in a worker ---------------------------------------------------------------

_CONNECTIONS = {}


def connection(src):
    """A worker's read-only connection to the database of src (plan()), kept for its
    next chunks: DuckDB's threads the parent's shared between the workers, no progress
    bar, sandboxed as the parent's is."""
    path, sandboxed, threads = src
    con = _CONNECTIONS.get(path)
    if con is None:
        con = db.connect(path, read_only=True)
        con.execute(f"SET threads = {int(threads)}")
        con.execute("SET enable_progress_bar = false")     # (one bar a worker on one terminal)
        if sandboxed:
            sandbox.lock(con)
        _CONNECTIONS[path] = con
    return con
