"""The step graph, the critical path and a what-if on a large trace database, timed
in-process (the bar: one iteration's graph and path in under 10 s on the 2-core
machine; docs/benchmarks.md).

usage: python benchmarks/bench_critical_path.py DB [RUN] [--all | --all-only]
       python benchmarks/bench_critical_path.py --spark WORKDIR [RANKS]
DB: e.g. the 1 GB trace (benchmarks/make_big_trace.py
tests/data/torch/h100_resnet50_bs64_amp.json.gz 300 big.json; tracedb ingest big.json --db DB).
--all: also every iteration at once (critical_path_summary iteration=all: the graph read
a chunk of iterations at a time). --all-only: that alone, so the peak RSS printed is its
own (run it with PYTHONPATH at another checkout to compare two versions in one run).
--spark: a RANKS-rank job (64 by default) made from the real 2-rank straggler capture
(tests/data/dist/ddp_straggler; rank k a copy of rank k % 2, world size RANKS, its clock k us
later, as tests/test_distributed_spark.py makes it), ingested into WORKDIR/job.duckdb and
exported to the lake WORKDIR/lake (kept for the next run); then the job's critical_path,
critical_path_summary and what_if on DuckDB (the database) and on Spark local[*] (the lake:
analysis/critpath_spark.py), each timed, the rows compared.
"""
import os
import resource
import sys
import time
from pathlib import Path

from tracedb.analysis import critpath
from tracedb.query import reports
from tracedb.store import db, sql


def timed(label, fn):
    t0 = time.perf_counter()
    out = fn()
    dt = time.perf_counter() - t0
    print(f"{label:<52} {dt:8.2f} s")
    return out


def main(path, run=None, every=False, only_all=False):
    if not os.path.isfile(path):
        sys.exit(f"no such database: {path}")
    con = db.connect(path, read_only=True)
    run = run or sql.scalar(con, "SELECT run FROM runs WHERE kind = 'trace' ORDER BY n_events DESC LIMIT 1")
    n = sql.scalar(con, "SELECT n_events FROM runs WHERE run = ?", [run])
    it = sql.scalar(con, "SELECT iteration FROM iteration_steadiness WHERE run = ? AND steady", [run])
    print(f"{path}: run {run}, {n:,} events, steady iteration {it}")
    if only_all:
        return every_iteration(con, run)
    g = timed("graph of the steady iteration (nodes, edges)", lambda: critpath.load(con, run, it))
    edges = sum(len(v) for v in g.preds.values())
    print(f"{'':<52} {len(g.nodes):,} nodes, {edges:,} edges")
    segs = timed("critical path walk", lambda: critpath.critical_path(g))
    print(f"{'':<52} {len(segs):,} segments")
    timed("replay (what_if, kernels x 0.5)", lambda: critpath.replay(g, critpath.Change(scale=0.5, kernel_like="%")))
    for name, params in (("critical_path", {}), ("critical_path_summary", {}),
                         ("what_if", {"zero_launch_overhead": "true"})):
        r = timed(f"report {name} (steady)", lambda: reports.run(con, name, {"run": run, **params}))
        del r
    timed("the whole run's edges (SQL, no window)",
          lambda: con.execute("SELECT count(*) FROM step_graph_edges WHERE run = ?", [run]).fetchall())
    if every:
        return every_iteration(con, run)
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


def every_iteration(con, run):
    cpu = time.process_time()
    r = timed("report critical_path_summary iteration=all",
              lambda: reports.run(con, "critical_path_summary", {"run": run, "iteration": "all"}))
    print(f"{'':<52} {r.num_rows:,} rows, {time.process_time() - cpu:.1f} CPU s (all threads)")
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


STRAGGLER = Path(__file__).resolve().parent.parent / "tests/data/dist/ddp_straggler"
sys.path.insert(0, str(STRAGGLER.parents[2]))      # tests/: the job maker the tests use
from independent_dist import make_job  # noqa: E402


def spark_job(workdir, ranks=64):
    from tracedb.cli import main as cli
    from tracedb.query import engines, lake
    w = Path(workdir)
    job = f"job{ranks}"
    dbp, lk = w / f"{job}.duckdb", w / "lake"
    if not (lk / "manifest.json").exists():
        make_job(STRAGGLER, w / job, ranks)
        timed(f"ingest {ranks} ranks into a database", lambda: cli(["ingest", str(w / job), "--db", str(dbp)]))
        con = db.connect(dbp)
        timed("export the lake", lambda: lake.export(con, lk))
        con.close()
    con = db.connect(dbp, read_only=True)
    n = sql.scalar(con, "SELECT sum(n_events) FROM runs r JOIN job_runs j USING (run) WHERE j.job = ?", [job])
    print(f"job {job}: {ranks} ranks, {n:,} events")
    timed("Spark session start (not in the times below)", lambda: engines.spark_session().sql("SELECT 1").collect())
    cases = [("critical_path", {"job": job}), ("critical_path", {"job": job}),
             ("critical_path", {"job": job, "iteration": "all"}), ("critical_path_summary", {"job": job}),
             ("what_if", {"job": job, "remove_rank_lateness": "1", "path": "true"})]
    for name, params in cases:
        label = f"{name} {' '.join(f'{k}={v}' for k, v in params.items() if k != 'job')}".strip()
        cpu = time.process_time()
        d = timed(f"{label}: DuckDB", lambda: reports.run(con, name, params))
        d_cpu = time.process_time() - cpu
        s = timed(f"{label}: Spark over the lake", lambda: engines.run_spark(name, params, lk))
        print(f"{'':<52} {d.num_rows:,} rows, {'the same' if s.to_pylist() == d.to_pylist() else 'DIFFERENT'}; "
              f"DuckDB {d_cpu:.1f} CPU s")
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB (driver)")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if not args:
        sys.exit(__doc__)
    if "--spark" in sys.argv:
        sys.exit(spark_job(args[0], int(args[1]) if len(args) > 1 else 64))
    main(args[0], args[1] if len(args) > 1 else None, "--all" in sys.argv or "--all-only" in sys.argv,
         "--all-only" in sys.argv)
