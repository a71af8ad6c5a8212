"""Ingest benchmark: a large trace into a fresh database, next to json.load of the same file.

usage: python benchmarks/bench_ingest.py BIG.json [--skip-json-load]
Make BIG.json with ../shared/tools/scale_trace.py <h100_resnet50_bs64_amp.json.gz> 300 big.json
Each measurement runs in its own process so that peak RSS is its own.
"""
import json
import os
import resource
import subprocess
import sys
import tempfile
import time


def _child(mode, path, db):
    from tracedb import db as tdb            # imports are start-up, not ingest: outside the clock
    from tracedb.ingest import ingest_file
    t = time.perf_counter()
    if mode == "json.load":
        with open(path, "rb") as f:
            doc = json.load(f)
        n = len(doc["traceEvents"])
    else:
        con = tdb.connect(db)
        ingest_file(con, path)
        n = tdb.scalar(con, "SELECT count(*) FROM events")
        con.close()
    secs = time.perf_counter() - t
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"mode": mode, "seconds": secs, "events": n, "peak_rss_bytes": rss}))


def measure(mode, path, db=""):
    out = subprocess.run([sys.executable, __file__, "--child", mode, path, db],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main(argv):
    if argv[:1] == ["--child"]:
        return _child(*argv[1:4])
    path = argv[0]
    size = os.path.getsize(path)
    with tempfile.TemporaryDirectory() as d:
        ours = measure("tracedb ingest", path, os.path.join(d, "bench.duckdb"))
        db_size = os.path.getsize(os.path.join(d, "bench.duckdb"))
    rows = [ours]
    if "--skip-json-load" not in argv:
        rows.append(measure("json.load", path))
    print(f"input: {path} ({size / 1e6:.0f} MB); database file {db_size / 1e6:.0f} MB")
    print(f"{'what':16} {'seconds':>8} {'MB/s':>8} {'events/s':>11} {'peak RSS MB':>12}")
    for r in rows:
        print(f"{r['mode']:16} {r['seconds']:8.2f} {size / 1e6 / r['seconds']:8.1f} "
              f"{r['events'] / r['seconds']:11.0f} {r['peak_rss_bytes'] / 1e6:12.0f}")
    if len(rows) == 2:
        print(f"speed-up over json.load: {rows[1]['seconds'] / rows[0]['seconds']:.2f}x")


if __name__ == "__main__":
    main(sys.argv[1:])
