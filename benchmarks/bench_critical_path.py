"""The step graph, the critical path and a what-if on a large trace database, timed
in-process (the bar: one iteration's graph and path in under 10 s on the 2-core
machine; docs/benchmarks.md).

usage: python benchmarks/bench_critical_path.py DB [RUN] [--all | --all-only] [--workers N]
                      [--reports NAME,...] [--digest]
       python benchmarks/bench_critical_path.py --spark WORKDIR [RANKS]
DB: e.g. the 1 GB trace (benchmarks/make_big_trace.py
tests/data/torch/h100_resnet50_bs64_amp.json.gz 300 big.json; tracedb ingest big.json --db DB).
--all: also every iteration at once (critical_path_summary iteration=all: the graph read
a chunk of iterations at a time). --all-only: that alone, so the peak RSS printed is its
own (run it with PYTHONPATH at another checkout to compare two versions in one run).
With iteration=all the chunks run in worker processes where the machine has 4 cores or more
(analysis/critpath_workers.py): --workers N sets their number (TRACEDB_CRITPATH_WORKERS; 0:
the one process); --reports which reports run with iteration=all (critical_path_summary by
default; what_if with zero_launch_overhead=true); the CPU printed is this process's and its
workers', the peak RSS this process's, and the workers' resident sets (sampled) are printed
for each report. --digest prints each
result's row count and an order-sensitive hash of its rows, to compare two runs.
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

from tracedb.analysis import critpath, critpath_workers
from tracedb.query import reports
from tracedb.store import db, sql


def timed(label, fn):
    t0 = time.perf_counter()
    out = fn()
    dt = time.perf_counter() - t0
    print(f"{label:<52} {dt:8.2f} s")
    return out


def main(path, run=None, every=False, only_all=False, names=("critical_path_summary",), digest=False):
    if not os.path.isfile(path):
        sys.exit(f"no such database: {path}")
    con = db.connect(path, read_only=True)
    run = run or sql.scalar(con, "SELECT run FROM runs WHERE kind = 'trace' ORDER BY n_events DESC LIMIT 1")
    n = sql.scalar(con, "SELECT n_events FROM runs WHERE run = ?", [run])
    it = sql.scalar(con, "SELECT iteration FROM iteration_steadiness WHERE run = ? AND steady", [run])
    print(f"{path}: run {run}, {n:,} events, steady iteration {it}")
    if only_all:
        return every_iteration(con, run, names, digest)
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
        return every_iteration(con, run, names, digest)
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


WHAT_IF = {"what_if": {"zero_launch_overhead": "true"}}


def _cpu():
    """CPU s of this process (all threads) and of its ended workers."""
    me, kids = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _digest(table):
    """(rows, an order-sensitive hash of the rows): the same for the same rows in the
    same order, however the table is cut in batches."""
    import duckdb
    import pyarrow as pa
    t = table.append_column("_k", pa.array(range(table.num_rows), pa.int64()))
    c = duckdb.connect()
    c.register("t", t)
    return c.execute("SELECT count(*), sum(hash(t)) FROM t").fetchone()


class WorkerMemory:
    """The workers' memory while a report runs, sampled every 0.1 s from /proc: the
    largest sum of their resident sets at one time, and the largest of one
    (RUSAGE_CHILDREN's ru_maxrss also counts what a spawned worker held before it
    started Python: the parent's pages at the fork)."""

    def __init__(self):
        import threading
        self.total = self.one = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self):
        import glob
        while not self._stop.wait(0.1):
            total = 0
            for f in glob.glob(f"/proc/{os.getpid()}/task/*/children"):
                try:
                    pids = open(f).read().split()
                except OSError:
                    continue
                for pid in pids:
                    try:
                        kb = next(int(line.split()[1]) for line in open(f"/proc/{pid}/status")
                                  if line.startswith("VmRSS:"))
                    except (OSError, StopIteration):
                        continue
                    total += kb
                    self.one = max(self.one, kb)
            self.total = max(self.total, total)

    def stop(self):
        self._stop.set()
        self._thread.join()
        return f"workers' RSS at most {self.total / 1024:,.0f} MB together, {self.one / 1024:,.0f} MB one"


def every_iteration(con, run, names=("critical_path_summary",), digest=False):
    its = critpath.iterations(con, run, None, "all")
    plan = critpath_workers.plan(con, its, critpath.CHUNK_ITERATIONS)
    print(f"{len(os.sched_getaffinity(0))} cores usable, {len(its)} iterations: "
          + ("in this process" if plan is None else
             f"{plan[2]} workers ({len(plan[1])} chunks, {plan[0][2]} DuckDB threads each)"))
    for name in names:
        cpu, memory = _cpu(), WorkerMemory() if plan is not None else None
        r = timed(f"report {name} iteration=all",
                  lambda: reports.run(con, name, {"run": run, "iteration": "all", **WHAT_IF.get(name, {})}))
        print(f"{'':<52} {r.num_rows:,} rows, {_cpu() - cpu:.1f} CPU s (all threads and workers)"
              + (f", {memory.stop()}" if plan is not None else "")
              + (f", digest {_digest(r)}" if digest else ""))
        del r
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


def _option(name):
    """The value after --name (removed from sys.argv), or None."""
    if name not in sys.argv:
        return None
    k = sys.argv.index(name)
    if k + 1 >= len(sys.argv):
        sys.exit(f"{name} needs a value")
    value = sys.argv[k + 1]
    del sys.argv[k:k + 2]
    return value


if __name__ == "__main__":
    workers = _option("--workers")
    if workers is not None:
        os.environ["TRACEDB_CRITPATH_WORKERS"] = workers
    names = tuple((_option("--reports") or "critical_path_summary").split(","))
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if not args:
        sys.exit(__doc__)
    if "--spark" in sys.argv:
        sys.exit(spark_job(args[0], int(args[1]) if len(args) > 1 else 64))
    main(args[0], args[1] if len(args) > 1 else None, "--all" in sys.argv or "--all-only" in sys.argv,
         "--all-only" in sys.argv, names, "--digest" in sys.argv)
