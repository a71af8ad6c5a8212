"""Every saved report on a large database, timed in-process (the interactive bar:
each under 2 s on the 2-core machine).

usage: python benchmarks/bench_reports.py DB [RUN] [--all] [--only NAME,NAME] [--skip NAME,NAME]
--all: also every report that takes iteration=all, with it (every iteration and the
whole trace; docs/benchmarks.md says what each takes).
--only NAME,NAME: those reports alone. --skip NAME,NAME: all but those (timed apart).
"""
import os
import sys
import time

from tracedb.store import db, sql
from tracedb.query import reports


def main(path, run=None, every_iteration=False, only=None, skip=()):
    if not os.path.isfile(path):
        sys.exit(f"no such database: {path}")
    con = db.connect(path, read_only=True)
    run = run or sql.scalar(con, "SELECT run FROM runs WHERE kind = 'trace' ORDER BY n_events DESC LIMIT 1")
    n = sql.scalar(con, "SELECT n_events FROM runs WHERE run = ? AND kind = 'trace'", [run])
    if n is None:
        sys.exit(f"{path}: no trace run" + (f" named {run!r}" if run else ""))
    print(f"{path}: run {run}, {n:,} events")
    print(f"{'report':<26} {'seconds':>8} {'rows':>8}  note")
    slow = 0
    cases = [(name, rep, {}) for name, rep in reports.all_reports().items()]
    if every_iteration:
        cases += [(name, rep, {"iteration": "all"}) for name, rep in reports.all_reports().items()
                  if rep.param("iteration") and rep.param("iteration").type.upper() == "VARCHAR"]
    for name, rep, extra in [c for c in cases if (not only or c[0] in only) and c[0] not in skip]:
        params = ({"run": run} if rep.param("run") else {}) | extra
        t0 = time.perf_counter()
        try:
            rows, note = reports.run(con, name, params).num_rows, ""
        except reports.ReportError as e:
            rows, note = 0, str(e)[:70]
        dt = time.perf_counter() - t0
        slow += dt >= 2 and not extra
        print(f"{name + (' (all)' if extra else ''):<26} {dt:8.2f} {rows:8d}  {note}")
    print(f"{slow} report(s) at 2 s or more" + (" (by default)" if every_iteration else ""))


if __name__ == "__main__":
    argv = sys.argv[1:]
    lists = {k: argv[argv.index(k) + 1].split(",") for k in ("--only", "--skip") if k in argv[:-1]}
    args = [a for i, a in enumerate(argv) if a not in ("--all", "--only", "--skip")
            and (i == 0 or argv[i - 1] not in ("--only", "--skip"))]
    if not 1 <= len(args) <= 2 or args[0].startswith("-"):
        sys.exit(__doc__.strip())
    main(*args, every_iteration="--all" in argv, only=lists.get("--only"), skip=lists.get("--skip", ()))
