"""One ingest of a trace with the batch size and the load's memory cap set: wall, CPU and
peak RSS of the process. Run each setting in its own process (peak RSS is the process's):

    for cfg in "256 896" "768 1280" "1536 2048"; do set -- $cfg; rm -f /tmp/e.duckdb*
        python benchmarks/bench_batch_size.py big.json $1 $2 /tmp/e.duckdb; done

BATCH_MB: ingest.trace.BATCH_BYTES in MB (3/4 of it on more than 4 threads); CAP_MIB:
ingest.trace.LOAD_MEMORY_CAP in MiB. docs/benchmarks.md, sixth round, has what it showed:
bigger batches do not bring the 1 GB trace to 2.7 s on 16 cores."""
import argparse
import os
import resource
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("batch_mb", type=int)
    ap.add_argument("cap_mib", type=int)
    ap.add_argument("db", help="database file to write (a new one)")
    a = ap.parse_args()
    from tracedb.ingest import trace
    trace.BATCH_BYTES = a.batch_mb << 20
    trace.LOAD_MEMORY_CAP = a.cap_mib << 20
    from tracedb.cli import main as cli
    t = time.time()
    rc = cli(["ingest", a.trace, "--db", a.db])
    wall = time.time() - t
    r = resource.getrusage(resource.RUSAGE_SELF)
    print(f"batch {a.batch_mb} MB cap {a.cap_mib} MiB: rc={rc} wall {wall:.2f} s cpu {r.ru_utime + r.ru_stime:.1f} s "
          f"peak RSS {r.ru_maxrss / 1024:.0f} MB {os.path.getsize(a.trace) / 1e6 / wall:.0f} MB/s", flush=True)


if __name__ == "__main__":
    main()
