"""Ingest benchmark: a large trace into a fresh database, next to json.load of the same file.

usage: python benchmarks/bench_ingest.py BIG.json [--skip-json-load] [--instructions]
Make BIG.json with ../shared/tools/scale_trace.py <h100_resnet50_bs64_amp.json.gz> 300 big.json
Each measurement runs in its own process so that peak RSS is its own.
--instructions: also count each process's instructions with Linux `perf stat` (start-up
included). On a shared machine they move by under 1% where times move by a third, so
they tell whether a change did less work (docs/benchmarks.md, History: change 13).
"""
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time


def _child(mode, path, db):
    from tracedb.store import db as tdb  # imports are start-up, not ingest: outside the clock
    from tracedb.ingest import ingest_file
    t, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
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
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    print(json.dumps({"mode": mode, "seconds": secs, "cpu_seconds": cpu, "events": n,
                      "peak_rss_bytes": after.ru_maxrss * 1024}))


def measure(mode, path, db="", instructions=False):
    cmd = [sys.executable, __file__, "--child", mode, path, db]
    with tempfile.NamedTemporaryFile("r", suffix=".perf") as counts:
        if instructions:
            cmd = ["perf", "stat", "-x,", "-e", "instructions", "-o", counts.name] + cmd
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        r = json.loads(out.strip().splitlines()[-1])
        if instructions:
            found = [line.split(",") for line in counts.read().splitlines() if ",instructions" in line]
            r["instructions"] = int(found[0][0]) if found and found[0][0].isdigit() else None
    return r


def main(argv):
    if argv[:1] == ["--child"]:
        return _child(*argv[1:4])
    if {"-h", "--help"} & set(argv):
        return print(__doc__.strip())
    files = [a for a in argv if not a.startswith("-")]
    unknown = [a for a in argv if a.startswith("-") and a not in ("--skip-json-load", "--instructions")]
    if len(files) != 1 or unknown:
        sys.exit(__doc__.strip())
    if not os.path.isfile(files[0]):
        sys.exit(f"no such file: {files[0]}")
    path = files[0]
    size = os.path.getsize(path)
    instructions = "--instructions" in argv
    if instructions and shutil.which("perf") is None:
        sys.exit("--instructions needs Linux perf (perf stat) on PATH")
    with tempfile.TemporaryDirectory() as d:
        ours = measure("tracedb ingest", path, os.path.join(d, "bench.duckdb"), instructions)
        db_size = os.path.getsize(os.path.join(d, "bench.duckdb"))
    rows = [ours]
    if "--skip-json-load" not in argv:
        rows.append(measure("json.load", path, instructions=instructions))
    print(f"input: {path} ({size / 1e6:.0f} MB); database file {db_size / 1e6:.0f} MB")
    print(f"{'what':16} {'seconds':>8} {'cpu s':>8} {'MB/s':>8} {'events/s':>11} {'peak RSS MB':>12}"
          + (f" {'G instr':>8}" if instructions else ""))
    for r in rows:
        g = r.get("instructions")
        print(f"{r['mode']:16} {r['seconds']:8.2f} {r['cpu_seconds']:8.2f} {size / 1e6 / r['seconds']:8.1f} "
              f"{r['events'] / r['seconds']:11.0f} {r['peak_rss_bytes'] / 1e6:12.0f}"
              + ((f" {g / 1e9:8.1f}" if g else f" {'?':>8}") if instructions else ""))
    if len(rows) == 2:
        print(f"speed-up over json.load: {rows[1]['seconds'] / rows[0]['seconds']:.2f}x")


if __name__ == "__main__":
    main(sys.argv[1:])
