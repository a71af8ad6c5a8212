"""Benchmark: match ~100k ncu kernels with ~100k trace kernels.

Builds (once, under WORKDIR) a scaled trace from the amp fixture with
../shared/tools/scale_trace.py and a scaled ncu report by repeating the
fixture report's rows with new IDs, ingests both into a fresh database and
times `match(..., whole_run=True)`; prints the numbers.

usage: python benchmarks/bench_match.py WORKDIR [--copies 117]
"""
import argparse
import csv
import gzip
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from tracedb.store import db, sql
from tracedb.ingest import ingest_file
from tracedb.ingest.match import match

HERE = Path(__file__).resolve().parent.parent
TRACE = HERE / "tests/data/torch/h100_resnet50_bs64_amp.json.gz"
NCU = HERE / "tests/data/ncu/h100_resnet50_bs64_amp_raw_baseunits.csv.gz"
SCALE = HERE.parent / "shared/tools/scale_trace.py"


def scaled_report(out, copies):
    with gzip.open(NCU, "rt", newline="") as f:
        rows = list(csv.reader(f))
    header, units, data = rows[0], rows[1], rows[2:]
    with open(out, "w", newline="") as f:
        w = csv.writer(f, quoting=csv.QUOTE_ALL, lineterminator="\n")
        w.writerow(header)
        w.writerow(units)
        for c in range(copies):
            for r in data:
                r = list(r)
                r[0] = str(c * len(data) + int(r[0]))
                w.writerow(r)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("workdir")
    ap.add_argument("--copies", type=int, default=117)
    a = ap.parse_args()
    work = Path(a.workdir)
    work.mkdir(parents=True, exist_ok=True)
    trace, report = work / f"trace_x{a.copies}.json", work / f"ncu_x{a.copies}.csv"
    if not trace.exists():
        subprocess.run([sys.executable, str(SCALE), str(TRACE), str(a.copies), str(trace)], check=True)
    if not report.exists():
        scaled_report(report, a.copies)
    dbp = work / "bench_match.duckdb"
    if dbp.exists():
        os.remove(dbp)
    con = db.connect(dbp)
    t = time.perf_counter()
    tr = ingest_file(con, trace).run
    t_trace = time.perf_counter() - t
    t = time.perf_counter()
    nr = ingest_file(con, report).run
    t_ncu = time.perf_counter() - t
    t = time.perf_counter()
    m = match(con, tr, nr, whole_run=True)
    t_match = time.perf_counter() - t
    q = sql.rows(con, "SELECT ncu_matched_pct, time_covered_pct FROM (" +
                "SELECT 100.0 * matched / ncu_kernels AS ncu_matched_pct, NULL AS time_covered_pct FROM match_runs)")[0]
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"trace kernels {m['trace_kernels']}, ncu kernels {m['ncu_kernels']}, candidates {m['candidates']}")
    print(f"ingest trace {t_trace:.1f} s, ingest ncu report ({report.stat().st_size / 1e6:.0f} MB) {t_ncu:.1f} s")
    print(f"match {t_match:.1f} s: {m['matched']} pairs ({q[0]:.2f}% of ncu kernels); peak RSS {rss:.0f} MB; "
          f"{os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
