"""What the ingest's per-iteration finding sums cost, and what they buy: the load script
an ingest with --op-totals runs last (schema/load/finding_aggregates.sql), run again on
an ingested trace, its wall and CPU seconds (all threads, this process) under the
ingest's 1 GiB memory cap, next to the FLOP totals' script (flop_aggregates.sql) in the
same run, ROUNDS times each, alternating; then findings with iteration=all read from the
stored rows against its sweep of the run (the run's rows taken out: what every run
without them takes), ROUNDS times alternating, row for row. All in one transaction,
rolled back: the database is left as it was.

usage: python benchmarks/bench_finding_aggregate.py DB [--rounds N]
"""
import os
import sys
import time

from tracedb.store import db
from tracedb.store.catalog import sql_text
from tracedb.store.sql import run_script
from tracedb.query import reports


def _cpu():
    t = os.times()
    return t.user + t.system


def _timed(fn):
    w, c = time.perf_counter(), _cpu()
    out = fn()
    return time.perf_counter() - w, _cpu() - c, out


def main(path, rounds=2):
    if not os.path.isfile(path):
        sys.exit(f"no such database: {path}")
    con = db.connect(path)
    run = con.execute("SELECT run FROM runs WHERE kind = 'trace' ORDER BY n_events DESC LIMIT 1").fetchone()[0]
    its = con.execute("SELECT count(*) FROM iterations WHERE run = ?", [run]).fetchone()[0]
    print(f"{path}: run {run}, {its:,} iterations")
    con.execute("SET memory_limit = '1GiB'")
    con.begin()
    try:
        for r in range(rounds):
            for name, table in (("finding_aggregates.sql", "finding_iteration_totals"),
                                ("flop_aggregates.sql", "op_flop_totals")):
                con.execute(f"DELETE FROM {table} WHERE run = ?", [run])
                wall, cpu, _ = _timed(lambda: run_script(con, sql_text("schema", f"load/{name}"), {"run": run}))
                print(f"round {r + 1}: {name:24} {wall:6.2f} s wall {cpu:6.2f} CPU s")
        params = {"run": run, "iteration": "all"}
        for r in range(rounds):
            w1, c1, stored = _timed(lambda: reports.run(con, "findings", params).to_pylist())
            con.execute("CREATE OR REPLACE TEMP TABLE _kept AS SELECT * FROM finding_iteration_totals WHERE run = ?",
                        [run])
            con.execute("DELETE FROM finding_iteration_totals WHERE run = ?", [run])
            w2, c2, swept = _timed(lambda: reports.run(con, "findings", params).to_pylist())
            con.execute("INSERT INTO finding_iteration_totals SELECT * FROM _kept")
            print(f"round {r + 1}: findings iteration=all stored {w1:6.2f} s ({c1:.2f} CPU s), swept {w2:6.2f} s "
                  f"({c2:.2f} CPU s), {len(stored):,} rows, {'the same' if stored == swept else 'DIFFERENT'}")
    finally:
        con.rollback()
        con.close()


if __name__ == "__main__":
    argv = sys.argv[1:]
    n = int(argv[argv.index("--rounds") + 1]) if "--rounds" in argv[:-1] else 2
    args = [a for i, a in enumerate(argv) if a != "--rounds" and (i == 0 or argv[i - 1] != "--rounds")]
    if len(args) != 1 or args[0].startswith("-"):
        sys.exit(__doc__.strip())
    main(args[0], n)
