"""The Parquet lake: every table (and the views the reports read) as a Parquet
dataset partitioned by run, plus a small manifest, so many machines can ingest
in parallel and other engines (Spark) can run the saved reports.

    DIR/manifest.json                            schema version, datasets, runs
    DIR/<dataset>/rank=<rank>/run=<run>/*.parquet one partition per run (source file),
                                                 under its rank (-1: no distributedInfo)
    DIR/runs/run=<run>/*.parquet                 (the runs rows carry their rank)
    DIR/_runs/<run>.json                         the runs row of each partition's source

A run name becomes part of a path: it is percent-encoded there (run_file_name;
DuckDB encodes the run=<run> directories the same way), so a name such as
`../x`, `/abs` or `a/b` (from a database made elsewhere) stays inside the lake.
"""
import functools
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from ..errors import TracedbError
from ..store.catalog import run_column_of, table_run_columns
from ..store.db import SCHEMA_VERSION
from ..store.sql import rows, sql_literal
from ..store.tuning import memory_cap, setting, unless_set

ROW_GROUP_ROWS = 122880          # DuckDB's Parquet row group


@dataclass
class Datasets:
    """What the lake holds, derived from the database's catalog and the reports' SQL:
    every table with a run column (per run), the views that reports running on
    other engines read (materialized per run; engines without DuckDB's SQL read
    these), and the relations without a run column (settings, calibration fits)."""
    tables: list
    views: list
    global_: list
    run_column: dict      # relation -> its run column (run, or trace_run)
    jobs: list = ()       # views joining the runs of a job: the engine defines them (job_views)


class LakeError(TracedbError):
    pass


def run_file_name(run):
    """The file name of a run's record under _runs/: the name percent-encoded (no
    separators, no leading dot), so it can never leave the directory."""
    name = quote(str(run), safe="")
    return ("%2E" + name[1:] if name.startswith(".") else name) + ".json"


def _lake_dir(lake):
    lake = Path(lake)
    if lake.exists() and not lake.is_dir():
        raise LakeError(f"{lake}: is a file, not a lake directory")
    try:
        lake.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise LakeError(f"{lake}: cannot create the lake directory ({(e.strerror or str(e)).lower()})") from None
    return lake


def datasets_of(con):
    cols = {}
    for rel, col, is_view in rows(con, """
            SELECT c.table_name, c.column_name, v.view_name IS NOT NULL
            FROM duckdb_columns() c LEFT JOIN duckdb_views() v
              ON v.view_name = c.table_name AND v.schema_name = c.schema_name AND NOT v.temporary
            WHERE NOT c.internal AND c.schema_name = 'main' AND c.database_name = current_database()"""):
        cols.setdefault(rel, (set(), is_view))[0].add(col)
    run_column = {r: col for r, (c, _) in cols.items() if (col := run_column_of(c))}
    read, jobs = _read_on_spark()
    tables = sorted(r for r, (_, v) in cols.items() if not v and r in run_column)
    tables.remove("runs")
    views = sorted(r for r in read if r in cols and cols[r][1] and r in run_column)
    global_ = sorted(r for r in read | {r for r, (_, v) in cols.items() if not v}
                     if r in cols and r not in run_column and r != "schema_info")
    return Datasets(["runs"] + tables, views, global_, run_column, sorted(jobs))


@functools.cache
def _read_on_spark():
    """The relations the Spark reports and the job views read, and the job views'
    names. Parsed once per process: sqlglot takes most of a second for every report,
    and a parallel ingest asks once per file."""
    from . import reports
    from .transpile import relations_of, relations_read
    read = set()
    for r in reports.all_reports().values():
        if "spark" in r.engines and not r.problems and r.prepared_by not in reports.SPARK_FORMS:
            read |= relations_read(r)
    for form in reports.SPARK_FORMS.values():      # an analysis's form on Spark: what it reads
        read |= set(getattr(form, "reads", ()))
    jobs = dict(job_views())          # join the runs of a job: the engine defines them (engines.py)
    for _, select in jobs.items():
        read |= relations_of(select)
    return frozenset(read - set(jobs)), jobs


def job_views():
    """(name, SELECT) of each view of schema/views/jobs.sql and stragglers.sql, in order. They join the
    runs of a job, so the lake holds no copy of them (a copy per run would be
    wrong); an engine defines them over the lake's datasets instead."""
    return view_selects("views/jobs.sql") + view_selects("views/stragglers.sql")


def view_selects(file):
    """(name, SELECT) of each view a schema file (schema/<file>) creates, in order: what
    an engine other than DuckDB defines from the views' own SQL."""
    from ..store.db import sql_text
    from ..store.sql import statements
    out = []
    for stmt in statements(sql_text("schema", file)):
        body = "\n".join(l for l in stmt.splitlines() if not l.lstrip().startswith("--"))
        m = re.match(r"\s*CREATE OR REPLACE VIEW (\w+) AS\s+(.*)$", body, re.S)
        if m:
            out.append((m.group(1), m.group(2)))
    return out


def _copy(con, select, target, partition):
    os.makedirs(target, exist_ok=True)
    part = f", PARTITION_BY ({partition}), OVERWRITE_OR_IGNORE true, FILENAME_PATTERN 'part_{{uuid}}'" \
        if partition else ", OVERWRITE_OR_IGNORE true"
    dest = target if partition else os.path.join(target, "data.parquet")
    con.execute(f"COPY ({select}) TO {sql_literal(dest)} (FORMAT parquet, COMPRESSION zstd{part})")


def export(con, lake, runs=None, globals_=True, progress=None):
    """Write the runs (all when None) of the database behind con into the lake;
    globals_: also the datasets that are not per run (rules, calibration fits);
    progress(i, total, dataset) before each dataset."""
    if runs is None:
        runs = [r[0] for r in rows(con, "SELECT run FROM runs ORDER BY run")]
    else:
        known = {r[0] for r in rows(con, "SELECT run FROM runs")}
        if missing := [r for r in runs if r not in known]:
            raise LakeError(f"no run {', '.join(missing)} in the database (see: tracedb query overview)")
    from ..ingest.names import path_name_problem  # (a database from elsewhere: checked before writing)
    if bad := next((why for r in runs if (why := path_name_problem(r, "run"))), None):
        raise LakeError(f"{bad}: this run cannot be a lake partition (export the other runs with --run); "
                        "nothing was written")
    lake = _lake_dir(lake)
    if not runs:
        return []
    # Under the cap, DuckDB's partitioned writer, which holds 524,288 rows of each
    # partition before it writes them, thrashed (the 10 GB trace's kernels: 12 s
    # against 3.7 s uncapped at 2.1 GB); flushed a Parquet row group at a time, 2.8 s
    # at 0.8 GB. A threshold the user set is left alone, as memory_cap leaves a limit.
    flush = "partitioned_write_flush_threshold"
    from .lake_swap import staging, swap_in  # written aside, then swapped in per run
    stage = staging(lake)
    try:
        with memory_cap(con), setting(con, flush, unless_set(con, flush, ROW_GROUP_ROWS)):
            _export(con, stage, runs, globals_, progress)
        swap_in(stage, lake)
    finally:
        if stage.exists():
            import shutil
            shutil.rmtree(stage, ignore_errors=True)
    if globals_:                 # a worker of lake.ingest leaves the manifest to its parent
        write_manifest(lake)
    return runs


def _export(con, lake, runs, globals_, progress):
    in_runs = "(" + ", ".join(sql_literal(r) for r in runs) + ")"
    ds = datasets_of(con)
    for i, name in enumerate(ds.tables + ds.views):
        if progress:
            progress(i, len(ds.tables) + len(ds.views), name)
        col = ds.run_column[name]
        n = rows(con, f"SELECT count(*) FROM {name} WHERE {col} IN {in_runs}")[0][0]
        if not n:
            continue
        if name == "runs":
            _copy(con, f"SELECT * FROM runs WHERE run IN {in_runs}", str(lake / name), "run")
            continue
        extra = f", t.{col} AS run" if col != "run" else ""      # partition column named run everywhere
        sel = (f"SELECT t.*{extra}, CAST(coalesce(r.rank, -1) AS INTEGER) AS rank FROM {name} t "
               f"JOIN runs r ON r.run = t.{col} WHERE t.{col} IN {in_runs}")
        _copy(con, sel, str(lake / name), "rank, run")
    if globals_:
        for name in ds.global_:
            _copy(con, f"SELECT * FROM {name}", str(lake / name), None)
    (lake / "_runs").mkdir(exist_ok=True)
    cols = [c[0] for c in con.execute("SELECT * FROM runs LIMIT 0").description]
    for r in rows(con, f"SELECT * FROM runs WHERE run IN {in_runs}"):
        rec = {k: (v if isinstance(v, (int, float, str, type(None))) else str(v)) for k, v in zip(cols, r)}
        (lake / "_runs" / run_file_name(rec["run"])).write_text(json.dumps(rec))


def write_manifest(lake):
    lake = Path(lake)
    datasets = sorted(p.name for p in lake.iterdir() if p.is_dir() and not p.name.startswith("_"))
    runs = [json.loads(p.read_text()) for p in sorted((lake / "_runs").glob("*.json"))]
    manifest = {"tracedb_schema_version": SCHEMA_VERSION, "partitioned_by": ["rank", "run"],
                "datasets": datasets,
                "runs": [{"run": r["run"], "kind": r["kind"], "rank": r.get("rank"), "path": r["path"]}
                         for r in runs]}
    tmp = lake / f"manifest.json.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(manifest, indent=1))
    os.replace(tmp, lake / "manifest.json")
    return manifest


def datasets(lake):
    """name -> glob of its Parquet files."""
    lake = Path(lake)
    if not (lake / "manifest.json").exists():
        raise FileNotFoundError(f"{lake}: not a tracedb lake (no manifest.json)")
    out = {}
    for name in json.loads((lake / "manifest.json").read_text())["datasets"]:
        out[name] = str(lake / name)
    return out


def _ingest_one(args):
    """Worker: one file into a scratch database, then its run into the lake.
    Returns (path, run or None, message, warnings)."""
    import warnings

    from ..store import db
    from ..ingest import IngestError, ingest_file
    from ..ingest.workdir import workdir
    path, lake, options = args
    lake = Path(lake)
    with workdir("tracedb-lake-") as d, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        con = db.connect(Path(d) / "one.duckdb")
        try:
            r = ingest_file(con, path, options=options)
        except IngestError as e:
            return path, None, str(e), [str(w.message) for w in caught]
        said = [str(w.message) for w in caught]
        digest, rank = rows(con, "SELECT content_hash, rank FROM runs WHERE run = ?", [r.run])[0]
        for old in (lake / "_runs").glob("*.json") if (lake / "_runs").exists() else []:
            rec = json.loads(old.read_text())
            if rec.get("content_hash") == digest:
                return path, rec["run"], "skipped: already in the lake", said
        if (lake / "_runs" / run_file_name(r.run)).exists():      # same name, other content
            new = f"{r.run}~{digest[:8]}"
            for t, named in {"runs": ["run"], **table_run_columns(con)}.items():
                for col in named:                # every column naming the run (run, paired_run ...)
                    con.execute(f"UPDATE {t} SET {col} = ? WHERE {col} = ?", [new, r.run])
            r.run = new
        export(con, lake, [r.run], globals_=False)
        con.close()
        return path, r.run, f"rank {rank}" if rank is not None else "loaded", said


def _print(line, level="info"):
    print(line)


def ingest(paths, lake, jobs=1, options=None, report=_print):
    """Ingest files straight into the lake, in `jobs` worker processes; report(line, level)
    per file and warning (level info | warning | error; warnings and errors name the file)."""
    from ..ingest.workers import each_in_workers
    _lake_dir(lake)
    work = [(str(p), str(lake), options or {}) for p in paths]
    failed = 0

    def tell(path, run, msg, said):
        for w in said:
            report(w, "warning")
        report(msg if run is None else f"{path}: run {run} ({msg})", "error" if run is None else "info")
        return run is None

    for result in each_in_workers(_ingest_one, work, jobs, ordered=True):
        failed += tell(*result)
    write_globals(lake)
    write_manifest(lake)
    return failed


def write_globals(lake):
    """Rules and calibration fits over every calibration run in the lake (one writer)."""
    from ..store import db
    from ..ingest.workdir import workdir
    lake = Path(lake)
    with workdir("tracedb-lake-") as d:
        con = db.connect(Path(d) / "g.duckdb")
        if (lake / "calibration").exists():
            cols = [c[0] for c in con.execute("SELECT * FROM calibration LIMIT 0").description]
            con.execute(f"INSERT INTO calibration SELECT {', '.join(cols)} FROM read_parquet("
                        f"{sql_literal(str(lake / 'calibration') + '/**/*.parquet')}, hive_partitioning = true)")
        for name in datasets_of(con).global_:
            _copy(con, f"SELECT * FROM {name}", str(lake / name), None)
        con.close()
