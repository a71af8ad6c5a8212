"""The critical path reports on Spark over a lake (critical_path,
critical_path_summary, what_if with `--engine spark`; method.md, "Critical path
and what-if", "On Spark").

The step graph is DuckDB SQL (schema/views/step_graph.sql: window functions and
ASOF joins over one run's events, which sqlglot cannot write for Spark). On Spark
it is built where it is local, per rank: a Spark task (a few ranks each) opens a
scratch DuckDB with the schema (a copy of the template, emptied between its
ranks), loads each rank's rows from the lake's Parquet partitions (runs, events,
threads, kernels, iterations, collectives) and reads the SAME views, in the same
windows, as critpath.graphs() does (critpath.chunk_rows); the rows come back as
Arrow IPC (RDD mapPartitions: DataFrame.mapInArrow would do, but pyspark 4 asks for
pandas, not a dependency, before it runs one). What joins the ranks is Spark SQL over the
lake: the job's runs and iterations (the job views of jobs.sql), the iterations'
spans, and the collectives' edges across ranks (step_graph_rank_edges, the view's
own SQL written for Spark by sqlglot). The driver then builds each iteration's
graph and walks it (or replays it) with critpath's code, and runs the report's
own SQL over the result in a scratch DuckDB: the rows are DuckDB's.

A cluster's executors need tracedb installed and the lake's folder readable
where the driver reads it (a shared file system): the tasks read their rank's
files by path.
"""
import contextlib
import json
import os
import tempfile
from pathlib import Path

import pyarrow as pa

from ..query import lake, reports
from ..query.reports import ReportError
from ..store import db
from ..store.sql import bind, sql_literal
from ..suggest import did_you_mean
from . import critpath, path_totals

# The lake's datasets a task loads into its scratch database: what the step graph's
# views (and critpath._NODES) read for one rank.
TASK_TABLES = ("runs", "events", "threads", "kernels", "iterations", "collectives")
# What the driver reads on Spark: the job views and their inputs, the iterations and
# the collectives (their edges across ranks); iteration_steadiness for one run's.
DRIVER_READS = ("job_runs", "job_iterations", "runs", "iterations", "collectives")
READS = frozenset(TASK_TABLES + DRIVER_READS + ("iteration_steadiness",)) - {"job_runs", "job_iterations"}

# ---- in a Spark task: one rank's step graph, by DuckDB ------------------------

@contextlib.contextmanager
def _scratch():
    """A scratch database with the schema's tables, views and macros (a copy of the
    template: a few ms), in a folder removed after the block (Spark ends its Python
    workers with os._exit: nothing left to an exit handler)."""
    with tempfile.TemporaryDirectory(prefix="tracedb-critpath-") as d:
        con = db.connect(os.path.join(d, "rank.duckdb"))
        try:
            yield con
        finally:
            con.close()


def _load_rank(con, lake_dir, run, part):
    """The rank's rows of TASK_TABLES from the lake into con, in place of the last
    rank's. part: the rank's partition folder value (its rank, -1 without one)."""
    for t in TASK_TABLES:
        con.execute(f"DELETE FROM {t}")
    for t in TASK_TABLES:
        folder = os.path.join(lake_dir, t)
        if not os.path.isdir(folder):           # no rank had such rows (no collectives)
            continue
        if t == "runs":                          # runs/run=<run>/ (the rows carry their rank)
            src = (f"read_parquet({sql_literal(folder + '/*/*.parquet')}, hive_partitioning = true, "
                   f"hive_types = {{'run': VARCHAR}})")
            con.execute(f"INSERT INTO runs BY NAME SELECT * FROM {src} WHERE run = $run", {"run": run})
            continue
        folder = os.path.join(folder, f"rank={part}")     # the rank's partitions only
        if not os.path.isdir(folder):
            continue
        src = (f"read_parquet({sql_literal(folder + '/*/*.parquet')}, hive_partitioning = true, "
               f"hive_types = {{'rank': VARCHAR, 'run': VARCHAR}})")
        con.execute(f"INSERT INTO {t} BY NAME SELECT * EXCLUDE (rank) FROM {src} WHERE rank = $part AND run = $run",
                    {"run": run, "part": str(part)})


def _load_rules(con, lake_dir):
    """The lake's layer_rules in place of the shipped ones (a database's own rules,
    `tracedb settings`, travel with its lake): the nodes' layer types are the ones
    the database and the other Spark reports give."""
    path = os.path.join(lake_dir, "layer_rules", "data.parquet")
    if os.path.exists(path):
        con.execute("DELETE FROM layer_rules")
        con.execute(f"INSERT INTO layer_rules BY NAME SELECT * FROM read_parquet({sql_literal(path)})")


def _ipc(table):
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return sink.getvalue().to_pybytes()


def _unipc(data):
    return pa.ipc.open_stream(pa.py_buffer(data)).read_all()


def _rank_graphs(lake_dir, work):
    """The function of a Spark task (mapPartitions): for each rank index i it is given
    (work[i]: run, partition, plan [(chunk of iterations, window)]), the rank's nodes
    and edges of each chunk, read in the chunk's window: (i, chunk, nodes, edges),
    the tables as Arrow IPC. (DataFrame.mapInArrow would say the same, but pyspark 4
    asks for pandas before it runs one.)"""
    def fn(indexes):
        with _scratch() as con:           # one per task, emptied between its ranks
            _load_rules(con, lake_dir)
            for i in indexes:
                run, part, plan = work[i]
                _load_rank(con, lake_dir, run, part)
                for k, (chunk, win) in enumerate(plan):
                    with critpath.step_window(con, *win) if win is not None else contextlib.nullcontext():
                        n, e = critpath.chunk_rows(con, [run], chunk)[run]
                    yield i, k, _ipc(n), _ipc(e)
    return fn


# ---- on the driver: what joins the ranks, by Spark SQL ------------------------

def _view_sql(name):
    """The SELECT of view `name` of schema/views/step_graph.sql, as Spark SQL."""
    from ..query import engines     # (sqlglot: imported when Spark runs, not with tracedb)
    return engines.spark_sql(dict(lake.view_selects("views/step_graph.sql"))[name])


def _rows(spark, sql):
    return [tuple(r) for r in spark.sql(sql).collect()]


def _in(values):
    return "(" + ", ".join(sql_literal(v) for v in values) + ")" if values else "(NULL)"


def _order_runs(runs):
    """As critpath._runs_of orders them (DuckDB: ORDER BY rank, run; NULLs last)."""
    return sorted(runs, key=lambda r: (r[1] is None, r[1] if r[1] is not None else 0, r[0]))


def _iterations(spark, run, job, iteration):
    """critpath.iterations() on Spark: [(run, job, iteration)]."""
    text = None if iteration is None else str(iteration).strip().lower()
    if text not in (None, "", "steady", "all") and not reports._is_step(text):
        raise ReportError(f"parameter iteration must be an iteration number, steady or all, got {iteration!r}")
    if job is not None:
        if text in (None, "", "steady"):
            its = _rows(spark, f"SELECT iteration FROM job_iterations WHERE job = {sql_literal(job)} AND steady")
        elif text == "all":
            its = _rows(spark, f"SELECT iteration FROM job_iterations WHERE job = {sql_literal(job)} "
                               "ORDER BY iteration")
        else:
            its = [(int(text),)]
        return [(None, job, i) for (i,) in its]
    where = "" if run is None else f" AND run = {sql_literal(run)}"
    runs = sorted(r for (r,) in _rows(spark, f"SELECT run FROM runs WHERE kind = 'trace'{where}"))
    if text in (None, "", "steady"):
        got = _rows(spark, f"SELECT run, iteration FROM iteration_steadiness WHERE steady AND run IN {_in(runs)}")
    elif text == "all":
        got = _rows(spark, f"SELECT run, iteration FROM iterations WHERE run IN {_in(runs)} ORDER BY run, iteration")
    else:
        got = [(r, int(text)) for r in runs]
    by = {}
    for r, i in got:
        by.setdefault(r, []).append(i)
    return [(r, None, i) for r in runs for i in by.get(r, ())]


def _window(spans, names, first, last):
    """critpath._window_of from the runs' iterations rows (run -> [(iteration, start, end)])."""
    lo_prev = [s for r in names for i, s, _ in spans.get(r, ())
               if i == first - 1 and any(j == first for j, _, _ in spans[r])]
    lo = [s for r in names for i, s, _ in spans.get(r, ()) if i == first]
    hi = [e for r in names for i, _, e in spans.get(r, ()) if first <= i <= last and e is not None]
    lo_prev = min((s for s in lo_prev if s is not None), default=None)
    lo = min((s for s in lo if s is not None), default=None)
    if not hi:
        return None
    lo = lo_prev if lo_prev is not None else lo
    if lo is None:
        return None
    return lo, max(hi) + 1_000_000_000


def graphs(spark, lake_dir, its):
    """(run, job, iteration, graph or None) for each of its, as critpath.graphs()
    gives them from a database: the ranks' nodes and edges built in Spark tasks, the
    edges across ranks and the iterations read by Spark SQL."""
    if not its:
        return
    groups = []                  # (run, job, runs [(run, rank)], [iterations])
    for rj in dict.fromkeys((r, j) for r, j, _ in its):
        groups.append((*rj, [], [it for r, j, it in its if (r, j) == rj]))
    for run, job, runs, _ in groups:
        if job is not None:
            runs += _order_runs(_rows(spark, f"SELECT run, rank FROM job_runs WHERE job = {sql_literal(job)}"))
        else:
            runs += _rows(spark, f"SELECT run, rank FROM runs WHERE run = {sql_literal(run)}")
    names = sorted({r for _, _, rs, _ in groups for r, _ in rs})
    spans = {}
    for r, i, s, e in _rows(spark, f"SELECT run, iteration, start_ns, end_ns FROM iterations WHERE run IN {_in(names)}"):
        spans.setdefault(r, []).append((i, s, e))
    # the collectives' edges across ranks into these runs (critpath._RANK_EDGES; the source
    # kernel's start from its collectives row, where ingest copied it from kernels)
    spark.sql(_view_sql("step_graph_rank_edges")).createOrReplaceTempView("step_graph_rank_edges")
    edges = _rows(spark, "SELECT e.src_run, e.src_id, e.dst_id, e.dst_run, r.rank, c.ts_ns "
                         "FROM step_graph_rank_edges e JOIN collectives c ON c.run = e.src_run AND c.kernel_id = e.src_id "
                         f"JOIN runs r ON r.run = e.src_run WHERE e.dst_run IN {_in(names)}")
    # the plan: each group's iterations in chunks (one iteration alone: its own window, as load())
    work, plans = [], []
    for run, job, runs, group in groups:
        rn = [r for r, _ in runs]
        chunks = [group[k:k + critpath.CHUNK_ITERATIONS] for k in range(0, len(group), critpath.CHUNK_ITERATIONS)]
        plan = [(c, _window(spans, rn, c[0], max(c))) for c in chunks]
        plans.append(plan)
        for r, rank in runs:
            work.append((r, -1 if rank is None else rank, plan))
    sc = spark.sparkContext
    parts = min(len(work), 4 * max(1, sc.defaultParallelism))
    lake_path = os.path.abspath(str(lake_dir))       # the tasks' working folder may be another
    tables = {}

    def read(k):
        """The ranks' nodes and edges of chunk k (of each group's plan): one Spark job a
        chunk, so that the driver holds a chunk's rows, as critpath.graphs() does."""
        sub = [(r, part, [p[k]] if k < len(p) else []) for r, part, p in work]
        for i, _, n, e in (sc.parallelize(range(len(sub)), parts)
                           .mapPartitions(_rank_graphs(lake_path, sub)).collect()):
            tables[(i, k)] = (_unipc(n), _unipc(e))

    w = 0
    for (run, job, runs, group), plan in zip(groups, plans):
        rn = [r for r, _ in runs]
        shared = {("spans", r): {i: (s, e) for i, s, e in spans.get(r, ())} for r in rn}
        by_dst = {}
        for row in edges:
            if row[3] in rn:
                by_dst.setdefault((row[3], row[2]), []).append(row)
        shared[("rank_edges", tuple(rn))] = by_dst
        idx = {r: w + k for k, r in enumerate(rn)}
        w += len(rn)
        for k, (chunk, _) in enumerate(plan):
            if (idx[rn[0]], k) not in tables:
                read(k)
            cache = dict(shared)
            for r in rn:
                n, e = tables.pop((idx[r], k))
                cache[r] = (critpath._Slices(n, "iteration"), critpath._Slices(e, "_it"))
            for it in chunk:
                yield run, job, it, critpath._load(None, critpath.Graph(), runs, it, job, cache)


# ---- the reports ----------------------------------------------------------------

def run_spark(name, params, lake_dir, master=None):
    """A critical path report (critical_path, critical_path_summary, what_if) on Spark
    over a lake: the rows reports.run() gives from a database holding the lake's runs."""
    report = reports.get(name)
    values = reports.bound_params(report, params or {})
    datasets = lake.datasets(lake_dir)          # not a lake: said before Spark starts
    if name == "critical_path_summary" and values.get("job") is None and "power" in datasets:
        raise ReportError(f"report critical_path_summary on Spark: the lake {lake_dir} holds power logs, and the "
                          "energy on one run's path is integrated over them on DuckDB only; give job=NAME (a job's "
                          "path has no energy), or run it on the database")
    run = values.get("run")
    if run is not None:              # a typo would give no rows (DuckDB: reports.check_run_names)
        known = {r["run"] for r in json.loads((Path(lake_dir) / "manifest.json").read_text())["runs"]}
        if run not in known:
            raise ReportError(f"no run named {run!r} in the lake {lake_dir}{did_you_mean(run, known)}")
    missing = [t for t in ("runs", "events", "kernels", "iterations") if t not in datasets]
    if missing:
        raise ReportError(f"report {name}: the lake {lake_dir} has no {', '.join(missing)}, so there is no "
                          "step graph to build on Spark")
    from ..query import engines
    spark = engines.spark_session(master)
    engines.register(spark, datasets, set(DRIVER_READS) | ({"iteration_steadiness"} if values.get("job") is None
                                                           else set()))
    its = _iterations(spark, values.get("run"), values.get("job"), values.get("iteration"))
    gs = graphs(spark, lake_dir, its)
    if report.prepared_by == "what_if":
        t, p = critpath.what_ifs_of(gs, critpath.change_of(values))
        tables = {"_what_if": t, "_critical_path": p}
    else:       # (critical_path_summary on Spark walks: no stored sums)
        tables = {"_critical_path": critpath.paths_of(gs), "_critical_path_sums": path_totals.empty_sums()}
    with tempfile.TemporaryDirectory(prefix="tracedb-critpath-") as d:
        con = db.connect(os.path.join(d, "report.duckdb"))
        try:
            for k, t in tables.items():
                con.register(k, t)
            return con.sql(report.sql, params=bind(report.sql, values)).to_arrow_table()
        finally:
            con.close()


run_spark.reads = READS
reports.register_spark_form("critical_path", run_spark)
reports.register_spark_form("what_if", run_spark)
reports.register_spark_form("critical_path_sums", run_spark)
