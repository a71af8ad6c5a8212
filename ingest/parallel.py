"""Many traces at once (a directory of rank traces): every core works across files.

DuckDB has one writer per database file, so each trace is read, parsed and
derived by a worker process (the same ingest_file as always) into a database of
its own in memory, which writes the run's rows of every table to Arrow IPC files
on local disk; the parent inserts them into the target, one transaction per file
(duplicates skipped, names made unique there), while the workers go on with the
next files. Arrow files, not scratch databases: a scratch database compressed
every row in the worker and the parent decompressed it again (1.1 GB of rank
traces: 27 CPU-s of copies, docs/benchmarks.md). The inserts run several at once,
each on a cursor of its own (a transaction each: DuckDB appends from concurrent
transactions), without keeping the insertion order (event_id keeps it): a rank's
136 MB trace is under 3 row groups of events, so one insert, even unordered, keeps
1-3 of 16 threads busy. Whether a run is a duplicate or clashes with a rank of its
job is decided again just before its commit, one at a time, against every run
committed so far. A file that fails is reported and leaves nothing behind. Files
that pair with a trace (ncu reports, power logs) are not handled here: the caller
loads them after.
"""
import os
import tempfile
import threading
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

import duckdb

from ..progress import file_bar, phase
from .workers import each_in_workers
from ..store.catalog import run_column_of, table_run_columns
from ..store.sql import rows, scalar, sql_literal
from ..store.tuning import pool_blocks
from ..store.files import remove
from .errors import IngestError, database_error

# Copies of finished runs into the target at once (each its own transaction and
# cursor); the DuckDB threads are shared among them.
COPIES_AT_ONCE = 4


# Rows per Arrow batch a worker writes: one of DuckDB's row groups, so the parent's
# unordered insert gives each thread whole row groups.
IPC_BATCH_ROWS = 122880


def _work(args):
    """Worker: one trace into a database in memory, its run's rows of each table to
    Arrow IPC files (prefix + table); returns what the parent needs."""
    import pyarrow as pa
    from ..store import db
    from . import ingest_file
    path, prefix, run, options, threads = args
    try:
        con = db.connect(":memory:")
        con.execute(f"SET threads = {threads}")   # the cores shared out among the files at work
        con.execute(f"SET temp_directory = {sql_literal(prefix + 'spill')}")   # beyond the memory cap
        pool_blocks(con)
        r = ingest_file(con, path, run=run, options=options)
        n = scalar(con, "SELECT n_events FROM runs WHERE run = ?", [r.run]) or 0
        tables = []
        for table, named in {"runs": ["run"], **table_run_columns(con)}.items():
            if (col := run_column_of(named)) is None:
                continue
            reader = con.sql(f'SELECT * FROM {table} WHERE "{col}" = {sql_literal(r.run)}').to_arrow_reader(IPC_BATCH_ROWS)
            out = prefix + table + ".arrow"
            wrote = 0
            with pa.OSFile(out, "wb") as f, pa.ipc.new_file(f, reader.schema) as w:
                for batch in reader:
                    w.write_batch(batch)
                    wrote += batch.num_rows
            if wrote:
                tables.append((table, out))
            else:
                os.remove(out)
        con.close()
        return path, tables, r.run, None, n
    except IngestError as e:
        return path, [], None, str(e), 0


def _identity(runs):
    """(content_hash, job, rank, world_size) of a worker's run (its runs row, Arrow)."""
    row = runs.select(["content_hash", "job", "rank", "world_size"]).to_pylist()[0]
    return row["content_hash"], row["job"], row["rank"], row["world_size"]


def _refused(con, identity, path):
    """Why a run of that identity (_identity) cannot land, as a result (a duplicate:
    skipped) or a (path, error) pair (its rank is taken), judged against the runs
    committed in the target; None when it can."""
    from . import IngestResult, _existing
    digest, job, rank, world = identity
    if (old := _existing(con, digest)) is not None:
        return IngestResult(path, old, "trace", "skipped", f"already ingested as run {old}")
    if job is not None:                  # the rank check of jobs.assign, against what landed before
        from .jobs import clash
        if why := clash(con, job, rank, world, path):
            return path, f"{path}: {why}; nothing was loaded"
    return None


def _as_json(table, columns):
    """table with those string columns typed as Arrow's JSON (their storage unchanged,
    no copy): as plain strings, the insert into a JSON column parses every value again
    to check it (DuckDB wrote them as JSON; ingest/trace.py does the same for args)."""
    import pyarrow as pa
    for c in columns:
        i = table.schema.get_field_index(c)
        col = table.column(i)
        if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
            continue
        t = pa.json_(col.type)
        table = table.set_column(i, pa.field(c, t), pa.chunked_array(
            [pa.ExtensionArray.from_storage(t, chunk) for chunk in col.chunks], type=t))
    return table


class _Copies:
    """The runs of finished workers copied into the target, COPIES_AT_ONCE at a time."""

    def __init__(self, con, at_once):
        self.con = con
        self.pool = ThreadPoolExecutor(max(1, at_once), thread_name_prefix="tracedb-copy")
        self.decide = threading.Lock()     # the checks before a commit, and the commit, one copy at a time
        self.names = set()                 # names given to copies under way (not yet committed)
        self.naming = threading.Lock()
        self.by_hash = {}                  # content hash -> the copy of it under way
        self.count = 0

    def submit(self, tables, run, path):
        import pyarrow as pa
        from . import _unique_run
        identity = _identity(pa.ipc.open_file(pa.memory_map(dict(tables)["runs"])).read_all())
        with self.naming:
            name = _unique_run(self.con, run, self.names)   # nor the name of a copy under way
            self.names.add(name)
            # the same content in two files of one call (a file and its copy): the second
            # waits for the first, then is judged against it committed (a duplicate,
            # skipped); at once, runs.content_hash's UNIQUE made it a write conflict
            before = self.by_hash.get(identity[0])
            fut = self.pool.submit(self._copy_after, before, tables, run, path, name, identity)
            self.by_hash[identity[0]] = fut
        return fut

    def _copy_after(self, before, tables, run, path, name, identity):
        if before is not None:
            wait([before])             # submitted first, so started first: no pool slot waits on a queued one
        return self._copy(tables, run, path, name, identity)

    def _copy(self, tables, run, path, name, identity):
        """Insert one worker's run (its Arrow files) into the target (one transaction) as
        name; a run refused or failed gives its name back for the copies after it."""
        from . import IngestResult
        got = None
        try:
            got = self._copy_in(tables, run, path, name, identity)
        except (duckdb.Error, OSError, ValueError, KeyError) as e:   # pyarrow's errors are OSError/ValueError
            got = (path, f"{path}: {database_error(e) if isinstance(e, duckdb.Error) else e}; nothing was loaded")
        finally:
            if not (isinstance(got, IngestResult) and got.status == "loaded"):
                with self.naming:
                    self.names.discard(name)
        return got

    def _copy_in(self, tables, run, path, name, identity):
        import pyarrow as pa
        con = self.con.cursor()
        try:
            if (no := _refused(con, identity, path)) is not None:     # known before the copy
                return no
            # memory-mapped: the pages are the files' own (in the page cache), not copies
            arrow = {t: pa.ipc.open_file(pa.memory_map(f)).read_all() for t, f in tables}
            with phase("folder: copy a run in (threads summed)"):
                return self._insert(con, arrow, run, path, name, identity)
        finally:
            con.close()

    def _insert(self, con, arrow, run, path, name, identity):
        from . import IngestResult, _rollback
        con.execute("SET SESSION preserve_insertion_order = false")   # event_id keeps the order
        con.begin()
        try:
            for table, data in arrow.items():
                have = dict(rows(con, "SELECT column_name, data_type FROM duckdb_columns() WHERE "
                                      "database_name = current_database() AND schema_name = 'main' "
                                      "AND table_name = ?", [table]))
                cols = [c for c in data.column_names if c in have]
                data = _as_json(data, [c for c in cols if have[c] == "JSON"])
                # every column naming a run (run, trace_run, ncu_run, paired_run ...) gets the new name
                sel = ", ".join(f'CASE WHEN "{c}" = $old THEN $new ELSE "{c}" END' if c == "run" or c.endswith("_run")
                                else f'"{c}"' for c in cols)
                con.register("_worker_rows", data)
                try:
                    con.execute(f"INSERT INTO {table} ({', '.join(chr(34) + c + chr(34) for c in cols)}) "
                                f"SELECT {sel} FROM _worker_rows", {"old": run, "new": name})
                finally:
                    con.unregister("_worker_rows")
            with self.decide:
                # again, against the runs committed since this transaction began (a
                # fresh connection sees them): the same content, or the same rank,
                # copied by another thread meanwhile
                check = self.con.cursor()
                try:
                    no = _refused(check, identity, path)
                finally:
                    check.close()
                if no is not None:
                    _rollback(con)
                    return no
                con.commit()
        except duckdb.Error as e:
            _rollback(con)
            return path, f"{path}: {database_error(e)}; nothing was loaded"
        except BaseException:
            _rollback(con)
            raise
        return IngestResult(path, name, "trace", "loaded")

    def close(self):
        self.pool.shutdown(wait=True, cancel_futures=True)


def _cores():
    """The cores this process may run on (taskset, a cpuset), else the machine's."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def ingest_traces(con, items, jobs=None, options=None, report=print):
    """Ingest trace files in `jobs` worker processes (default: every core) into the
    database behind con; items are paths or (path, options of that file) pairs;
    report(result or (path, error)) per file as it lands. Returns the number of
    files that failed."""
    items = [(str(i), {}) if not isinstance(i, tuple) else (str(i[0]), i[1]) for i in items]
    paths = [p for p, _ in items]
    cores = _cores()
    jobs = jobs or cores
    # fewer files than cores (8 rank traces on 16 cores): each worker's DuckDB gets the
    # cores the others leave, so a file is parsed on several (its pieces at once)
    threads = max(1, cores // max(1, min(jobs, len(items))))
    failed = 0
    sizes = {str(p): os.path.getsize(p) for p in paths}
    with tempfile.TemporaryDirectory(prefix="tracedb-many-") as d, file_bar(len(paths)) as at:
        work = [(p, os.path.join(d, f"{i}."), None, {**(options or {}), **o}, threads)
                for i, (p, o) in enumerate(items)]
        copies = _Copies(con, min(COPIES_AT_ONCE, len(items)))
        under_way = {}        # future -> (path, its Arrow files, events)

        def landed(futures):
            nonlocal failed
            for fut in futures:
                path, tables, events = under_way.pop(fut)
                result = fut.result()
                failed += isinstance(result, tuple)
                report(result)
                for _, f in tables:
                    remove(f)
                at(sizes[path], events)
        try:
            with phase("folder: workers (parse, derive) waited for"):
                results = iter(each_in_workers(_work, work, jobs))
            while True:
                with phase("folder: workers (parse, derive) waited for"):
                    got = next(results, None)
                if got is None:
                    break
                path, tables, run, error, events = got
                if error:
                    failed += 1
                    report((path, error))
                    at(sizes[path], events)
                else:
                    under_way[copies.submit(tables, run, path)] = (path, tables, events)
                landed([f for f in list(under_way) if f.done()])
            with phase("folder: last copies waited for"):
                while under_way:
                    done, _ = wait(list(under_way), return_when=FIRST_COMPLETED)
                    landed(done)
        finally:
            copies.close()
    return failed
