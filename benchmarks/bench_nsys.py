"""Nsight Systems ingest benchmark: a large SQLite export into a fresh database, in MB/s.

usage: python benchmarks/bench_nsys.py BIG.sqlite [--make MB] [--from tests/data/nsys/mfu_2gpu_before.sqlite.gz]
                                     [--readers N] [--against BIG.json] [--phases]

--make MB builds BIG.sqlite first (when it is missing) with scale_nsys.py: a real
export's activity and NVTX rows replicated, each copy shifted past the previous one
in time and in correlation ids, until the file is about MB megabytes. The ingest runs in a child process, so
the peak RSS printed is its own (its worker readers' apart); its CPU counts theirs.

--against BIG.json measures the ingest of a Kineto trace in the same run (make one
with ../shared/tools/scale_trace.py), before and after the export's, so that the two
rates are compared under the same load; and prints their ratio, per MB and per event.

--phases prints TRACEDB_PROFILE's wall and CPU seconds per phase and statement, and
the peak RSS in each, sampled every 10 ms; --duckdb-memory adds DuckDB's own memory
by tag (duckdb_memory()), read beside the load: DuckDB then keeps the loaded rows in
memory after the commit, so the RSS is no longer the ingest's alone.
"""
import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

def _child(path, db, readers, phases):
    """phases: "" (none), "rss" or "duckdb" (with DuckDB's memory by tag)."""
    from tracedb.store import db as tdb
    from tracedb.ingest import ingest_file, nsys
    if readers >= 0:          # worker processes reading rowid ranges (0: the reading thread)
        nsys.PROCESS_READERS, nsys.PROCESS_MIN_ROWS = readers, 0
    t, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
    con = tdb.connect(db)
    sampler = _PhaseMemory(con, phases == "duckdb") if phases else None
    try:
        ingest_file(con, path)
    finally:
        if sampler:
            sampler.stop()
    n = tdb.scalar(con, "SELECT count(*) FROM events")
    k = tdb.scalar(con, "SELECT count(*) FROM kernels")
    closing = time.perf_counter()
    con.close()
    secs = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)      # (the worker readers, joined by now)
    readers_cpu = kids.ru_utime + kids.ru_stime
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime) + readers_cpu
    print(json.dumps({"seconds": secs, "close_seconds": secs - (closing - t), "cpu_seconds": cpu, "events": n,
                      "gpu_activities": k,
                      "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                      "reader_peak_rss_bytes": kids.ru_maxrss * 1024, "reader_cpu_seconds": readers_cpu}))


class _PhaseMemory:
    """--phases: the process's RSS sampled every 10 ms, its peak in each phase (the
    innermost open one of TRACEDB_PROFILE's), printed to stderr at stop(); with
    --duckdb-memory, DuckDB's own memory too (duckdb_memory(), by tag). That one is
    read by a query on a cursor of its own, a transaction beside the load's, and
    DuckDB then holds the load's rows in memory after its commit (IN_MEMORY_TABLE)
    instead of leaving them in the file it wrote them to: it changes what it measures."""

    def __init__(self, con, duckdb_memory):
        import threading
        from tracedb import progress
        self.open, self.peaks, self.done = progress.OPEN, {}, False
        self.cur = con.cursor() if duckdb_memory else None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        page = os.sysconf("SC_PAGE_SIZE")
        while not self.done:
            with open("/proc/self/statm") as f:
                rss = int(f.read().split()[1]) * page
            name = self.open[-1] if self.open else "(outside the phases)"
            try:
                tags = dict(self.cur.execute("SELECT tag, memory_usage_bytes FROM duckdb_memory()").fetchall()
                            if self.cur else {})
            except Exception:          # (a sample the load's own statements did not leave room for)
                tags = {}
            p = self.peaks.setdefault(name, [0, 0, {}])
            p[0] = max(p[0], rss)
            if sum(tags.values()) > p[1]:
                p[1], p[2] = sum(tags.values()), tags
            time.sleep(0.01)

    def stop(self):
        self.done = True
        self.thread.join()
        if self.cur:
            self.cur.close()
        print(f"{'phase':44} {'peak RSS MB':>11}" + (f" {'DuckDB MB':>9}  DuckDB's largest tags (MB)" if self.cur else ""),
              file=sys.stderr)
        for name, (rss, mem, tags) in self.peaks.items():
            top = sorted(((v, k) for k, v in tags.items() if v >= 1e6), reverse=True)[:4]
            print(f"{name[:44]:44} {rss / 1e6:11.0f}" + (f" {mem / 1e6:9.0f}  " + " ".join(
                f"{k}={v / 1e6:.0f}" for v, k in top) if self.cur else ""), file=sys.stderr)


def main():
    if len(sys.argv) == 6 and sys.argv[1] == "--child":
        return _child(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
    ap = argparse.ArgumentParser()
    ap.add_argument("path")
    ap.add_argument("--make", type=float, metavar="MB")
    ap.add_argument("--from", dest="source", default=os.path.join(
        os.path.dirname(__file__), "..", "tests", "data", "nsys", "mfu_2gpu_before.sqlite.gz"))
    ap.add_argument("--readers", type=int, default=-1,
                    help="worker processes reading the export (0: one thread; default: as tracedb chooses)")
    ap.add_argument("--against", metavar="TRACE", help="a Kineto trace to ingest in the same run")
    ap.add_argument("--phases", action="store_true",
                    help="TRACEDB_PROFILE's wall and CPU per phase, and the peak RSS in each")
    ap.add_argument("--duckdb-memory", action="store_true",
                    help="with --phases: DuckDB's memory by tag in each phase too (a query beside the load's)")
    a = ap.parse_args()
    if a.make and not os.path.exists(a.path):
        from scale_nsys import make
        copies = make(a.path, a.source, a.make)
        print(f"made {a.path}: {copies} copies of {os.path.basename(a.source)}")
    traces = []
    if a.against:
        traces.append(_trace(a.against))
    size = os.path.getsize(a.path)
    d = tempfile.mkdtemp(prefix="bench-nsys-")
    try:
        env = dict(os.environ, **({"TRACEDB_PROFILE": "1"} if a.phases else {}))
        out = subprocess.run([sys.executable, __file__, "--child", a.path, os.path.join(d, "b.duckdb"), str(a.readers),
                              "duckdb" if a.phases and a.duckdb_memory else "rss" if a.phases else ""],
                             capture_output=True, text=True, env=env)
        if a.phases:
            print("\n".join(l for l in out.stderr.splitlines() if "Warning" not in l and not l.startswith("  warn")))
        if out.returncode:
            sys.exit(f"{a.path}: the ingest failed (exit status {out.returncode}):\n{out.stderr[-4000:]}")
        r = json.loads(out.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(d, True)
    print(f"{a.path}: {size / 1e6:.0f} MB, {r['events']} events, {r['gpu_activities']} GPU activities: "
          f"{r['seconds']:.1f} s, {size / 1e6 / r['seconds']:.1f} MB/s, {r['events'] / r['seconds']:,.0f} events/s; "
          f"CPU {r['cpu_seconds']:.1f} s ({size / 1e6 / r['cpu_seconds']:.1f} MB per CPU second); "
          f"peak RSS {r['peak_rss_bytes'] / 1e6:.0f} MB; closing (checkpoint) {r['close_seconds']:.1f} s; "
          f"load average {os.getloadavg()[0]:.1f}")
    if r["reader_cpu_seconds"]:
        print(f"  of which worker readers: CPU {r['reader_cpu_seconds']:.1f} s, the largest one's peak RSS "
              f"{r['reader_peak_rss_bytes'] / 1e6:.0f} MB")
    if a.against:
        traces.append(_trace(a.against))
        t_size = os.path.getsize(a.against)
        cpu = sum(t["cpu_seconds"] for t in traces) / 2
        events = traces[0]["events"]
        print(f"export / trace, per CPU second: {size / r['cpu_seconds'] / (t_size / cpu):.2f}x the MB, "
              f"{r['events'] / r['cpu_seconds'] / (events / cpu):.2f}x the events (the trace's CPU: mean of its two runs)")


def _trace(path):
    """The Kineto trace's ingest (bench_ingest.py's child), printed as the export's is."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench_ingest import measure
    d = tempfile.mkdtemp(prefix="bench-nsys-trace-")
    try:
        t = measure("tracedb ingest", path, os.path.join(d, "t.duckdb"))
    finally:
        shutil.rmtree(d, True)
    size = os.path.getsize(path)
    print(f"{path}: {size / 1e6:.0f} MB, {t['events']} events (Kineto trace): {t['seconds']:.1f} s, "
          f"{size / 1e6 / t['seconds']:.1f} MB/s, {t['events'] / t['seconds']:,.0f} events/s; "
          f"CPU {t['cpu_seconds']:.1f} s ({size / 1e6 / t['cpu_seconds']:.1f} MB per CPU second); "
          f"peak RSS {t['peak_rss_bytes'] / 1e6:.0f} MB; load average {os.getloadavg()[0]:.1f}")
    return t

if __name__ == "__main__":
    main()
