"""Every saved report on a large database, timed in-process (the interactive bar:
each under 2 s on the 2-core machine).

usage: python benchmarks/bench_reports.py DB [RUN]
"""
import os
import sys
import time

from tracedb import db, reports


def main(path, run=None):
    if not os.path.isfile(path):
        sys.exit(f"no such database: {path}")
    con = db.connect(path, read_only=True)
    run = run or db.scalar(con, "SELECT run FROM runs WHERE kind = 'trace' ORDER BY n_events DESC LIMIT 1")
    n = db.scalar(con, "SELECT n_events FROM runs WHERE run = ? AND kind = 'trace'", [run])
    if n is None:
        sys.exit(f"{path}: no trace run" + (f" named {run!r}" if run else ""))
    print(f"{path}: run {run}, {n:,} events")
    print(f"{'report':<26} {'seconds':>8} {'rows':>8}  note")
    slow = 0
    for name, rep in reports.all_reports().items():
        params = {"run": run} if rep.param("run") else {}
        t0 = time.perf_counter()
        try:
            rows, note = reports.run(con, name, params).num_rows, ""
        except reports.ReportError as e:
            rows, note = 0, str(e)[:70]
        dt = time.perf_counter() - t0
        slow += dt >= 2
        print(f"{name:<26} {dt:8.2f} {rows:8d}  {note}")
    print(f"{slow} report(s) at 2 s or more")


if __name__ == "__main__":
    if not 1 <= len(sys.argv) - 1 <= 2 or sys.argv[1] in ("-h", "--help"):
        sys.exit(__doc__.strip())
    main(*sys.argv[1:])
