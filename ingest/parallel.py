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
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import contextmanager

import duckdb

from tracedb.db import remove, rows, scalar, sql_literal
from tracedb.ingest.errors import IngestError, database_error


def _work(args):
    """Worker: one trace into its own scratch database; returns what the parent needs."""
    from tracedb import db
    from tracedb.ingest import ingest_file
    path, scratch, run, options = args
    try:
        con = db.connect(scratch)
        con.execute("SET threads = 1")        # the parallelism is across files
        db.pool_blocks(con)
        r = ingest_file(con, path, run=run, options=options)
        n = scalar(con, "SELECT n_events FROM runs WHERE run = ?", [r.run]) or 0
        con.close()
        return path, scratch, r.run, None, n
    except IngestError as e:
        return path, scratch, None, str(e), 0


def _copy_run(con, scratch, run, path):
    """Copy one run of a scratch database into the target (one transaction)."""
    from tracedb.ingest import IngestResult, _rollback, _unique_run
    from tracedb.lake import datasets_of
    con.execute(f"ATTACH {sql_literal(scratch)} AS _scratch (READ_ONLY)")
    try:
        digest = scalar(con, "SELECT content_hash FROM _scratch.runs WHERE run = ?", [run])
        old = scalar(con, "SELECT run FROM runs WHERE content_hash = ?", [digest])
        if old is not None:
            return IngestResult(path, old, "trace", "skipped", f"already ingested as run {old}")
        job, rank, world = rows(con, "SELECT job, rank, world_size FROM _scratch.runs WHERE run = ?", [run])[0]
        if job is not None:                  # the rank check of jobs.assign, against what landed before
            from tracedb.jobs import clash
            if why := clash(con, job, rank, world):
                return path, f"{path}: {why}; nothing was loaded"
        con.begin()
        try:
            name = _unique_run(con, run)
            ds = datasets_of(con)
            for table in ds.tables:
                col = ds.run_column[table]
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


@contextmanager
def _progress(total_files, total_bytes):
    """Files, MB and events per second on a terminal; nothing otherwise."""
    if not sys.stderr.isatty():
        yield lambda *a: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.fields[rate]}"), TimeElapsedColumn(), transient=True) as bar:
        task = bar.add_task("ingest", total=total_files, rate="")
        seen = {"bytes": 0, "events": 0}
        t0 = bar.get_time()

        def step(nbytes, nevents):
            seen["bytes"] += nbytes
            seen["events"] += nevents
            dt = max(bar.get_time() - t0, 1e-9)
            bar.update(task, advance=1, rate=f"{seen['bytes'] / dt / 1e6:.0f} MB/s, "
                                             f"{seen['events'] / dt / 1e3:.0f} k events/s")
        yield step


def ingest_traces(con, items, jobs=None, options=None, report=print):
    """Ingest trace files in `jobs` worker processes (default: every core) into the
    database behind con; items are paths or (path, options of that file) pairs;
    report(result or (path, error)) per file as it lands. Returns the number of
    files that failed."""
    items = [(str(i), {}) if not isinstance(i, tuple) else (str(i[0]), i[1]) for i in items]
    paths = [p for p, _ in items]
    import multiprocessing
    jobs = jobs or os.cpu_count() or 1
    failed = 0
    sizes = {str(p): os.path.getsize(p) for p in paths}
    with tempfile.TemporaryDirectory(prefix="tracedb-many-") as d, _progress(len(paths), sum(sizes.values())) as at:
        work = [(p, os.path.join(d, f"{i}.duckdb"), None, {**(options or {}), **o})
                for i, (p, o) in enumerate(items)]
        # spawn, not fork: the parent holds DuckDB threads that a fork would copy mid-flight
        with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            for fut in as_completed([pool.submit(_work, w) for w in work]):
                path, scratch, run, error, events = fut.result()
                if error:
                    failed += 1
                    report((path, error))
                else:
                    report(_copy_run(con, scratch, run, path))
                remove(scratch)
                at(sizes[path], events)
    return failed
