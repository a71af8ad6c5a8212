"""What the ingest's per-iteration FLOP totals cost, and what they buy: the load script
an ingest with --op-totals runs after the op totals (schema/load/flop_aggregates.sql),
run again on an ingested trace, its wall and CPU seconds per statement (all threads,
this process), under the ingest's 1 GiB memory cap, next to the op totals' script
(iteration_aggregates.sql) in the same run, ROUNDS times each, alternating; then the
FLOP reports with iteration=all read from the stored rows against their sweep of the
run (the run's rows taken out first: the fallback every run without them takes), row
for row, each ROUNDS times alternating. All in one transaction, rolled back: the
database is left as it was. Compare the CPU with the ingest's own (bench_ingest.py,
or TRACEDB_PROFILE=1 tracedb ingest ... --op-totals).

usage: python benchmarks/bench_flop_aggregate.py DB [--rounds N] [--no-compare]
"""
import os
import sys
import time

from tracedb.store import db
from tracedb.store.catalog import sql_text
from tracedb.store.sql import statements
from tracedb.query import reports

REPORTS = ("flops_by_op", "flop_utilization", "bwd_fwd_ratio")


def _cpu():
    t = os.times()
    return t.user + t.system


def _report(con, name, run):
    w, c = time.perf_counter(), _cpu()
    rows = reports.run(con, name, {"run": run, "iteration": "all"}).to_pylist()
    return rows, time.perf_counter() - w, _cpu() - c


def _script(con, name, run, table, verbose):
    con.execute(f"DELETE FROM {table} WHERE run = ?", [run])
    w0, c0 = time.perf_counter(), _cpu()
    for stmt in statements(sql_text("schema", f"load/{name}")):
        w, c = time.perf_counter(), _cpu()
        con.execute(stmt, {"run": run} if "$run" in stmt else None)
        if verbose:
            first = next(line for line in stmt.strip().splitlines() if line.strip() and not line.startswith("--"))
            print(f"  {time.perf_counter() - w:7.2f} s wall {_cpu() - c:7.2f} s CPU  {first[:60]}")
    return time.perf_counter() - w0, _cpu() - c0


def main(path, rounds=2, compare=True):
    if not os.path.isfile(path):
        sys.exit(f"no such database: {path}")
    con = db.connect(path)
    con.execute("SET memory_limit = '1GiB'")
    run = con.execute("SELECT run FROM runs WHERE kind = 'trace' ORDER BY n_events DESC LIMIT 1").fetchall()[0][0]
    con.execute("BEGIN")
    try:
        walked = {}
        if compare:
            con.execute("DELETE FROM op_flop_totals WHERE run = ?", [run])
            for name in REPORTS:
                walked[name] = _report(con, name, run)[0]
        for k in range(rounds):
            for name, table in (("flop_aggregates.sql", "op_flop_totals"),
                                ("iteration_aggregates.sql", "op_iteration_totals")):
                wall, cpu = _script(con, name, run, table, verbose=k == 0 and name.startswith("flop"))
                n = con.execute(f"SELECT count(*) FROM {table} WHERE run = ?", [run]).fetchall()[0][0]
                print(f"{name} of {run}: {wall:.2f} s wall, {cpu:.2f} s CPU, {n:,} rows")
        if compare:
            for k in range(rounds):
                for name in REPORTS:
                    stored, dt, cpu = _report(con, name, run)
                    con.execute("CREATE OR REPLACE TEMP TABLE _kept AS SELECT * FROM op_flop_totals WHERE run = ?", [run])
                    con.execute("DELETE FROM op_flop_totals WHERE run = ?", [run])
                    swept, dt2, cpu2 = _report(con, name, run)
                    con.execute("INSERT INTO op_flop_totals SELECT * FROM _kept")
                    print(f"{name} iteration=all: stored {dt:.2f} s ({cpu:.2f} CPU s), swept {dt2:.2f} s "
                          f"({cpu2:.2f} CPU s); same rows: {stored == swept == walked[name]} ({len(stored):,})")
    finally:
        con.execute("ROLLBACK")
        con.close()


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--no-compare"]
    rounds = 2
    if "--rounds" in args:
        i = args.index("--rounds")
        rounds = int(args[i + 1])
        del args[i:i + 2]
    if len(args) != 1:
        sys.exit(__doc__.strip())
    main(args[0], rounds, compare="--no-compare" not in sys.argv)
