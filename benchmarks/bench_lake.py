"""Benchmark: 32 rank traces (the bert fixture with distributedInfo rank 0..31)
ingested into a lake with --jobs 2, then rank_summary on DuckDB (over a
database of the same files) and on Spark (over the lake). Prints times and
peak memory (of this process and of its children).

usage: python benchmarks/bench_lake.py WORKDIR [--ranks 32] [--jobs 2]
"""
import argparse
import gzip
import json
import resource
import shutil
import time
from pathlib import Path

from tracedb.store import db
from tracedb.query import engines
from tracedb.query import lake
from tracedb.query import reports
from tracedb.ingest import ingest_file

SRC = Path(__file__).resolve().parent.parent / "tests/data/torch/h100_bert_bs16_amp.json.gz"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("workdir")
    ap.add_argument("--ranks", type=int, default=32)
    ap.add_argument("--jobs", type=int, default=2)
    a = ap.parse_args()
    w = Path(a.workdir)
    w.mkdir(parents=True, exist_ok=True)
    doc = json.load(gzip.open(SRC, "rt"))
    files = []
    for r in range(a.ranks):
        p = w / f"rank{r:02d}.json.gz"
        if not p.exists():
            doc["distributedInfo"] = {"backend": "nccl", "rank": r, "world_size": a.ranks}
            with gzip.open(p, "wt", compresslevel=1) as f:
                json.dump(doc, f)
        files.append(p)
    mb = sum(p.stat().st_size for p in files) / 1e6
    lk = w / "lake"
    shutil.rmtree(lk, ignore_errors=True)
    t = time.perf_counter()
    lake.ingest(files, lk, jobs=a.jobs, report=lambda line, level: None)
    t_lake = time.perf_counter() - t
    dbp = w / "ranks.duckdb"
    dbp.unlink(missing_ok=True)
    con = db.connect(dbp)
    t = time.perf_counter()
    for p in files:
        ingest_file(con, p)
    t_db = time.perf_counter() - t
    t = time.perf_counter()
    d = reports.run(con, "rank_summary", {})
    t_duck = time.perf_counter() - t
    engines.spark_session()
    t = time.perf_counter()
    s = engines.run_spark("rank_summary", {}, lk)
    t_spark = time.perf_counter() - t
    self_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    kids_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"{a.ranks} rank files, {mb:.0f} MB gzip; ingest into the lake with --jobs {a.jobs}: {t_lake:.1f} s; "
          f"into one database serially: {t_db:.1f} s")
    print(f"rank_summary: DuckDB {t_duck:.2f} s ({d.num_rows} rows), Spark local {t_spark:.2f} s "
          f"({s.num_rows} rows, session already started)")
    print(f"peak RSS: this process {self_mb:.0f} MB (with the Spark driver's Python side), largest child {kids_mb:.0f} MB")


if __name__ == "__main__":
    main()
