"""What the ingest's per-iteration aggregates cost, and what they buy: the load script
the ingest runs after the derivation (schema/load/iteration_aggregates.sql) run again on
an ingested trace, its wall and CPU seconds per statement (all threads, this process),
under the ingest's 1 GiB memory cap; then the ops report with iteration=all read from
the stored rows against the report's own walk (the run's rows taken out first), row for
row. All in one transaction, rolled back: the database is left as it was. Compare the
CPU with the ingest's own (bench_ingest.py).

usage: python benchmarks/bench_op_aggregate.py DB [--no-compare]
"""
import os
import sys
import time

from bench_flop_aggregate import _script     # (this folder: the statements timed one by one)
from tracedb.store import db
from tracedb.query import reports


def _ops_all(con, run):
    w = time.perf_counter()
    rows = reports.run(con, "ops", {"run": run, "iteration": "all"}).to_pylist()
    return rows, time.perf_counter() - w


def main(path, compare=True):
    if not os.path.isfile(path):
        sys.exit(f"no such database: {path}")
    con = db.connect(path)
    con.execute("SET memory_limit = '1GiB'")
    run = con.execute("SELECT run FROM runs WHERE kind = 'trace' ORDER BY n_events DESC LIMIT 1").fetchall()[0][0]
    con.execute("BEGIN")
    try:
        con.execute("DELETE FROM op_iteration_totals WHERE run = ?", [run])
        if compare:
            walked, dt = _ops_all(con, run)
            print(f"ops iteration=all walked: {dt:.2f} s ({len(walked):,} rows)")
        wall, cpu = _script(con, "iteration_aggregates.sql", run, "op_iteration_totals", verbose=True)
        print(f"aggregates of {run}: {wall:.2f} s wall, {cpu:.2f} s CPU, "
              f"{con.execute('SELECT count(*) FROM op_iteration_totals WHERE run = ?', [run]).fetchall()[0][0]:,} rows")
        if compare:
            stored, dt = _ops_all(con, run)
            print(f"ops iteration=all from the aggregate: {dt:.2f} s; same rows: {stored == walked} ({len(stored):,})")
    finally:
        con.execute("ROLLBACK")
        con.close()


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--no-compare"]
    if len(args) != 1:
        sys.exit(__doc__.strip())
    main(args[0], compare="--no-compare" not in sys.argv)
