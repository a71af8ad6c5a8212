"""What storing critical_path_summary's sums per iteration at ingest costs (now stored by
`tracedb ingest --path-totals`, analysis/path_totals.py, with these sums).

    python benchmarks/bench_path_totals.py DB [--threads N] [--check]

Makes the critical path of every iteration of every trace run of DB (read only),
chunks of critpath.CHUNK_ITERATIONS iterations spread over N threads (each its own
cursor: DuckDB's SQL runs without Python's lock, the graphs and the walk hold it),
and sums it as critical_path_summary does (run, iteration, category, layer type:
segments, dur_ns, step_ns). Prints the wall and CPU seconds (all threads) and the
rows. --check also runs the report with iteration=all and compares the rows
(segments, dur_ns, step_ns; energy_j is not a sum: it needs the segments' times).
On a database ingested with --path-totals the report reads the stored sums: --check then
compares with those.
Compare the CPU with the ingest's (`/usr/bin/time -v tracedb ingest ... --op-totals`).
"""
import argparse
import concurrent.futures
import resource
import sys
import time

import duckdb

from tracedb.query import reports
from tracedb.analysis import critpath, path_totals


def sums(con, its):
    """{(run, iteration, category, layer_type): [segments, dur_ns, step_ns]}"""
    return path_totals.sums(con, its)


def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("db")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args(argv)
    con = duckdb.connect(a.db, read_only=True)
    its = critpath.iterations(con, None, None, "all")
    n = critpath.CHUNK_ITERATIONS
    chunks = [its[k:k + n] for k in range(0, len(its), n)]
    w0, c0 = time.perf_counter(), cpu()
    total = {}
    with concurrent.futures.ThreadPoolExecutor(a.threads) as pool:
        for part in pool.map(lambda ch: sums(con.cursor(), ch), chunks):
            total.update(part)
    wall, used = time.perf_counter() - w0, cpu() - c0
    print(f"{len(its)} iterations, {len(chunks)} chunks on {a.threads} threads: {wall:.1f} s wall, "
          f"{used:.1f} CPU s, {len(total)} rows; peak RSS "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    if a.check:
        w0, c0 = time.perf_counter(), cpu()
        t = reports.run(con, "critical_path_summary", {"iteration": "all"})
        rows = t.to_pylist() if hasattr(t, "to_pylist") else t
        print(f"report iteration=all: {time.perf_counter() - w0:.1f} s wall, {cpu() - c0:.1f} CPU s, "
              f"{len(rows)} rows")
        walk = {(r["run"], r["iteration"], r["category"], r["layer_type"]):
                [r["segments"], r["dur_ns"], r["step_ns"]] for r in rows}
        same = walk == total
        print("same rows as the report:", same)
        if not same:
            diff = [k for k in set(walk) | set(total) if walk.get(k) != total.get(k)]
            print(len(diff), "differ, e.g.", [(k, walk.get(k), total.get(k)) for k in diff[:3]])
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
