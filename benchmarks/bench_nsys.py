"""Nsight Systems ingest benchmark: a large SQLite export into a fresh database, in MB/s.

usage: python benchmarks/bench_nsys.py BIG.sqlite [--make MB] [--from tests/data/nsys/mfu_2gpu_before.sqlite.gz]
                                     [--readers N]

--make MB builds BIG.sqlite first (when it is missing) from a real export by
replicating its activity and NVTX rows, each copy shifted past the previous one
in time and in correlation ids, until the file is about MB megabytes: the rows
are real rows, only their number grows. The ingest runs in a child process, so
the peak RSS printed is its own.
"""
import argparse
import gzip
import json
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

GROWN = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_MEMCPY",
         "CUPTI_ACTIVITY_KIND_MEMSET", "NVTX_EVENTS")


def make(out, source, mb):
    """out: source's export with its grown tables replicated until out is about mb MB."""
    data = gzip.decompress(open(source, "rb").read()) if source.endswith(".gz") else open(source, "rb").read()
    with open(out, "wb") as f:
        f.write(data)
    c = sqlite3.connect(out)
    for (index,) in c.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL").fetchall():
        c.execute(f'DROP INDEX "{index}"')
    span = c.execute("SELECT max(\"end\") - min(start) + 1000 FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0]
    corr = c.execute("SELECT max(correlationId) - min(correlationId) + 1 FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0]
    for t in GROWN:
        c.execute(f"CREATE TEMP TABLE orig_{t} AS SELECT * FROM {t}")
    copy = 0
    while os.path.getsize(out) < mb * 1e6:
        copy += 1
        for t in GROWN:
            cols = [r[1] for r in c.execute(f"PRAGMA table_info({t})")]
            sel = ", ".join(f'"{x}" + {copy * span}' if x in ("start", "end")
                            else f'"{x}" + {copy * corr}' if x == "correlationId" else f'"{x}"' for x in cols)
            c.execute(f"INSERT INTO {t} SELECT {sel} FROM orig_{t}")
        c.commit()
    c.close()
    return copy + 1


def _child(path, db, readers):
    from tracedb.store import db as tdb
    from tracedb.ingest import ingest_file, nsys
    if readers >= 0:          # worker processes reading rowid ranges (0: the reading thread)
        nsys.PROCESS_READERS, nsys.PROCESS_MIN_ROWS = readers, 0
    t, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
    con = tdb.connect(db)
    ingest_file(con, path)
    n = tdb.scalar(con, "SELECT count(*) FROM events")
    k = tdb.scalar(con, "SELECT count(*) FROM kernels")
    con.close()
    secs = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    print(json.dumps({"seconds": secs, "cpu_seconds": cpu, "events": n, "gpu_activities": k,
                      "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        return _child(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    ap = argparse.ArgumentParser()
    ap.add_argument("path")
    ap.add_argument("--make", type=float, metavar="MB")
    ap.add_argument("--from", dest="source", default=os.path.join(
        os.path.dirname(__file__), "..", "tests", "data", "nsys", "mfu_2gpu_before.sqlite.gz"))
    ap.add_argument("--readers", type=int, default=-1,
                    help="worker processes reading the export (0: one thread; default: as tracedb chooses)")
    a = ap.parse_args()
    if a.make and not os.path.exists(a.path):
        copies = make(a.path, a.source, a.make)
        print(f"made {a.path}: {copies} copies of {os.path.basename(a.source)}")
    size = os.path.getsize(a.path)
    d = tempfile.mkdtemp(prefix="bench-nsys-")
    try:
        out = subprocess.run([sys.executable, __file__, "--child", a.path, os.path.join(d, "b.duckdb"), str(a.readers)],
                             capture_output=True, text=True, check=True).stdout
        r = json.loads(out.strip().splitlines()[-1])
    finally:
        shutil.rmtree(d, True)
    print(f"{a.path}: {size / 1e6:.0f} MB, {r['events']} events, {r['gpu_activities']} GPU activities: "
          f"{r['seconds']:.1f} s, {size / 1e6 / r['seconds']:.1f} MB/s, {r['events'] / r['seconds']:,.0f} events/s; "
          f"CPU {r['cpu_seconds']:.1f} s ({size / 1e6 / r['cpu_seconds']:.1f} MB per CPU second); "
          f"peak RSS {r['peak_rss_bytes'] / 1e6:.0f} MB; load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
