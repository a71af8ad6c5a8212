"""Many traces at once (a directory of rank traces): every core works across files.

DuckDB has one writer per database file, so each trace is read, parsed and
derived by a worker process into a scratch database of its own (the same
ingest_file as always); the parent then copies each finished run into the
target database, one transaction per file (duplicates skipped, names made
unique there), while the workers go on with the next files. A file that fails
is reported and leaves nothing behind. Files that pair with a trace (ncu
reports, power logs) are not handled here: the caller loads them after.
"""
import os
import tempfile

import duckdb

from ..progress import file_bar
from .workers import each_in_workers
from ..store.catalog import run_column_of, table_run_columns
from ..store.sql import rows, scalar, sql_literal
from ..store.tuning import pool_blocks
from ..store.files import remove
from .errors import IngestError, database_error


def _work(args):
    """Worker: one trace into its own scratch database; returns what the parent needs."""
    from ..store import db
    from . import ingest_file
    path, scratch, run, options, threads = args
    try:
        con = db.connect(scratch)
        con.execute(f"SET threads = {threads}")   # the cores shared out among the files at work
        pool_blocks(con)
        r = ingest_file(con, path, run=run, options=options)
        n = scalar(con, "SELECT n_events FROM runs WHERE run = ?", [r.run]) or 0
        con.close()
        return path, scratch, r.run, None, n
    except IngestError as e:
        return path, scratch, None, str(e), 0


def _copy_run(con, scratch, run, path):
    """Copy one run of a scratch database into the target (one transaction)."""
    from . import IngestResult, _rollback, _unique_run
    con.execute(f"ATTACH {sql_literal(scratch)} AS _scratch (READ_ONLY)")
    try:
        digest = scalar(con, "SELECT content_hash FROM _scratch.runs WHERE run = ?", [run])
        old = scalar(con, "SELECT run FROM runs WHERE content_hash = ?", [digest])
        if old is not None:
            return IngestResult(path, old, "trace", "skipped", f"already ingested as run {old}")
        job, rank, world = rows(con, "SELECT job, rank, world_size FROM _scratch.runs WHERE run = ?", [run])[0]
        if job is not None:                  # the rank check of jobs.assign, against what landed before
            from .jobs import clash
            if why := clash(con, job, rank, world, path):
                return path, f"{path}: {why}; nothing was loaded"
        con.begin()
        try:
            name = _unique_run(con, run)
            for table, named in {"runs": ["run"], **table_run_columns(con)}.items():
                if (col := run_column_of(named)) is None:
                    continue
                cols = [c for (c,) in rows(con, "SELECT column_name FROM duckdb_columns() WHERE "
                                                "database_name = '_scratch' AND table_name = ?", [table])]
                if not cols:
                    continue
                # every column naming a run (run, trace_run, ncu_run, paired_run ...) gets the new name
                sel = ", ".join(f'CASE WHEN "{c}" = $old THEN $new ELSE "{c}" END' if c == "run" or c.endswith("_run")
                                else f'"{c}"' for c in cols)
                con.execute(f"INSERT INTO {table} ({', '.join(chr(34) + c + chr(34) for c in cols)}) "
                            f"SELECT {sel} FROM _scratch.{table} WHERE {col} = $old", {"old": run, "new": name})
            con.commit()
        except duckdb.Error as e:
            _rollback(con)
            return path, f"{path}: {database_error(e)}; nothing was loaded"
        except BaseException:
            _rollback(con)
            raise
        return IngestResult(path, name, "trace", "loaded")
    finally:
        con.execute("DETACH _scratch")


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
        work = [(p, os.path.join(d, f"{i}.duckdb"), None, {**(options or {}), **o}, threads)
                for i, (p, o) in enumerate(items)]
        for path, scratch, run, error, events in each_in_workers(_work, work, jobs):
            if error:
                failed += 1
                report((path, error))
            else:
                report(_copy_run(con, scratch, run, path))
            remove(scratch)
            at(sizes[path], events)
    return failed
