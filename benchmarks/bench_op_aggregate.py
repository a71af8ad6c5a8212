"""What storing the ops report's per-iteration rows at ingest would cost: the exact
aggregate (benchmarks/op_aggregate.sql) run on an ingested trace, its wall and CPU
seconds per statement (all threads, this process), under the ingest's 1 GiB memory cap;
then the ops report with iteration=all read from it against the live report, row for row.
Compare the CPU with the ingest's own (bench_ingest.py).

usage: python benchmarks/bench_op_aggregate.py DB [--no-compare]
"""
import os
import sys
import time

from tracedb.store import db
from tracedb.store.sql import statements
from tracedb.query import reports

_FROM_TABLE = """
SELECT run, iteration, level, name, calls, cpu_total_ns, cpu_self_ns, round(cpu_total_ns / calls, 1) AS cpu_mean_ns,
       gpu_total_ns, gpu_self_ns, kernels FROM op_iteration_totals WHERE iteration IS NOT NULL
UNION ALL
SELECT run, NULL, level, name, sum(calls), sum(cpu_total_ns), sum(cpu_self_ns), round(sum(cpu_total_ns) / sum(calls), 1),
       sum(gpu_total_ns), sum(gpu_self_ns), sum(kernels) FROM op_iteration_totals GROUP BY run, level, name"""


def _cpu():
    t = os.times()
    return t.user + t.system


def main(path, compare=True):
    con = db.connect(path, read_only=True)
    con.execute("SET memory_limit = '1GiB'")
    run = con.execute("SELECT run FROM runs WHERE kind = 'trace' ORDER BY n_events DESC LIMIT 1").fetchall()[0][0]
    text = open(os.path.join(os.path.dirname(__file__), "op_aggregate.sql")).read()
    w0, c0 = time.perf_counter(), _cpu()
    for stmt in statements(text):
        w, c = time.perf_counter(), _cpu()
        con.execute(stmt, {"run": run} if "$run" in stmt else None)
        print(f"  {time.perf_counter() - w:7.2f} s wall {_cpu() - c:7.2f} s CPU  {stmt.strip().splitlines()[0][:60]}")
    print(f"op aggregate of {run}: {time.perf_counter() - w0:.2f} s wall, {_cpu() - c0:.2f} s CPU, "
          f"{con.execute('SELECT count(*) FROM op_iteration_totals').fetchall()[0][0]:,} rows")
    if compare:
        w = time.perf_counter()
        stored = con.execute(_FROM_TABLE).fetchall()
        print(f"ops iteration=all from the aggregate: {time.perf_counter() - w:.2f} s")
        w = time.perf_counter()
        live = [tuple(r.values()) for r in reports.run(con, "ops", {"run": run, "iteration": "all"}).to_pylist()]
        print(f"ops iteration=all live: {time.perf_counter() - w:.2f} s; same rows: "
              f"{sorted(live, key=repr) == sorted(map(tuple, stored), key=repr)} ({len(live):,})")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--no-compare"]
    if len(args) != 1:
        sys.exit(__doc__.strip())
    main(args[0], compare="--no-compare" not in sys.argv)
