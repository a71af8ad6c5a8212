"""Ingest benchmark: a large trace into a fresh database, next to json.load of the same file.

usage: python benchmarks/bench_ingest.py BIG.json|DIR [--skip-json-load] [--instructions]
                                         [--cores 2,4,8,16] [--repeat N] [--profile]
Make BIG.json with ../shared/tools/scale_trace.py <h100_resnet50_bs64_amp.json.gz> 300 big.json
Each measurement runs in its own process so that peak RSS is its own.
--instructions: also count each process's instructions with Linux `perf stat` (start-up
included). On a shared machine they move by under 1% where times move by a third, so
they tell whether a change did less work (docs/benchmarks.md, History: change 13).
--cores 2,4,8,16: the ingest once per count, each process pinned to that many cores (the
first of those it may use; DuckDB's threads follow), json.load beside them once a round.
--repeat N: N rounds (same-run pairs: each round's ingest against its own json.load).
--keep DB: the last ingest's database kept as DB (for bench_reports.py).
--profile: TRACEDB_PROFILE=1 in the ingest's process: wall and CPU seconds of each phase
(pieces, parse, insert, every derivation statement, commit, close), one column per core count.
A directory: every trace in it (tracedb ingest DIR: files in parallel); json.load of each
file, one after another, is the yardstick.
--set MODULE.NAME=INT[,...]: a constant of the package set in the ingest's process (a
variant measured without editing the code: --set ingest.trace.BATCH_BYTES=134217728).
--label TEXT: the rows' name (default: tracedb ingest).
--memory: what the process holds at its peak RSS: DuckDB's memory by tag (duckdb_memory(),
read every 50 ms on a cursor beside the load until its derivation ends: after that a
transaction beside the commit changes what DuckDB keeps), Arrow's pool, the rest (the
allocators' free pages, Python, libraries); and the same at each phase's peak.
--sql STATEMENT: run on the ingest's connection first (SET allocator_flush_threshold = '32MB').
Each ingest row also gives when its peak RSS was reached (seconds after the start: the
phases, printed in order with --profile, say in which).
"""
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time


def _rss_bytes():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


class _PeakWatch:
    """The process's RSS every 5 ms: its peak and when (seconds after start)."""

    def __init__(self, phases=None):
        self.t0, self.peak, self.at, self.stop = time.perf_counter(), 0, 0.0, threading.Event()
        self.phases, self.after = phases, {}
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stop.wait(0.005):
            try:
                rss = _rss_bytes()
            except OSError:
                return
            if rss > self.peak:
                self.peak, self.at = rss, time.perf_counter() - self.t0
                try:           # the phases ended so far (tracedb.progress's, TRACEDB_PROFILE)
                    self.after = {k: v[2] for k, v in list((self.phases or {}).items())}
                except RuntimeError:
                    pass

    def done(self):
        self.stop.set()
        self.thread.join()
        return self.at


class _MemoryWatch:
    """--memory: RSS (/proc/self/statm) and Arrow's pool every 10 ms, DuckDB's memory by
    tag every 50 ms (a cursor of con), until the load's derivation ends; the sample at
    the peak RSS and at each phase's (the innermost open one of TRACEDB_PROFILE's)."""

    def __init__(self, con):
        from tracedb import progress
        self.open, self.done, self.tags, self.peaks = progress.OPEN, threading.Event(), {}, {}
        self.cur, self.t0 = con.cursor(), time.perf_counter()
        self.allocators = _Allocators()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        import pyarrow as pa
        page, last = os.sysconf("SC_PAGE_SIZE"), 0.0
        while not self.done.wait(0.01):
            with open("/proc/self/statm") as f:
                rss = int(f.read().split()[1]) * page
            name = self.open[-1] if self.open else "(outside the phases)"
            if self.cur is not None and any(n.startswith(("run metadata", "commit")) for n in list(self.open)):
                self.cur.close()     # the derivation is over: no transaction beside the commit
                self.cur = None
            now = time.perf_counter()
            if self.cur is not None and now - last >= 0.05:
                try:
                    self.tags = {k: v for k, v in self.cur.execute(
                        "SELECT tag, memory_usage_bytes FROM duckdb_memory() WHERE memory_usage_bytes > 0").fetchall()}
                except Exception:
                    pass
                last = now
            if rss > self.peaks.get(name, (0,))[0] or rss > self.peaks.get("(whole run)", (0,))[0]:
                sample = (rss, pa.total_allocated_bytes(), dict(self.tags), now - self.t0, self.allocators.read())
                for key in ("(whole run)", name):
                    if rss > self.peaks.get(key, (0,))[0]:
                        self.peaks[key] = sample

    def stop(self):
        self.done.set()
        self.thread.join()
        if self.cur is not None:
            self.cur.close()
        return {k: list(v) for k, v in self.peaks.items()}


class _Allocators:
    """The C allocators' own counts, where they can be read: DuckDB's jemalloc (its
    duckdb_je_mallctl: bytes allocated, and resident: its pages, the free ones not yet
    handed back included) and glibc's malloc (mallinfo2: in use, and taken from the OS;
    the Arrow tables DuckDB hands to Python are malloc'ed)."""

    def __init__(self):
        import ctypes
        self.ctypes, self.je, self.mallinfo = ctypes, None, None
        try:
            import duckdb
            mod = sys.modules.get("_duckdb") or getattr(duckdb, "duckdb", None)
            je = ctypes.CDLL(mod.__file__).duckdb_je_mallctl
            je.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t), ctypes.c_void_p,
                           ctypes.c_size_t]
            self.je = je
        except (AttributeError, OSError, TypeError):
            pass
        try:
            class _Info(ctypes.Structure):
                _fields_ = [(n, ctypes.c_size_t) for n in
                            "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]
            f = ctypes.CDLL("libc.so.6").mallinfo2
            f.restype = _Info
            self.mallinfo = f
        except (AttributeError, OSError):
            pass

    def _je(self, name):
        c = self.ctypes
        v, n = c.c_size_t(0), c.c_size_t(c.sizeof(c.c_size_t))
        return v.value if self.je(name.encode(), c.byref(v), c.byref(n), None, 0) == 0 else 0

    def read(self):
        """{je_allocated, je_resident, glibc_used, glibc_system} in bytes (0: not read)."""
        out = dict.fromkeys(("je_allocated", "je_resident", "glibc_used", "glibc_system"), 0)
        if self.je:
            c = self.ctypes
            e, n = c.c_uint64(1), c.c_size_t(8)
            self.je(b"epoch", c.byref(e), c.byref(n), c.byref(e), 8)     # the counts refreshed
            out["je_allocated"], out["je_resident"] = self._je("stats.allocated"), self._je("stats.resident")
        if self.mallinfo:
            m = self.mallinfo()
            out["glibc_used"], out["glibc_system"] = m.uordblks + m.hblkhd, m.arena + m.hblkhd
        return out


def _print_memory(r):
    print(f"\n{r['cores']} cores: at each phase's peak RSS (MB): DuckDB's memory (its buffer manager: its last "
          "sample, up to 50 ms old); DuckDB's jemalloc: allocated and resident; glibc's malloc: in use and taken "
          "from the OS; Arrow's pool; DuckDB's largest tags")
    print(f"{'phase':40} {'at s':>6} {'RSS':>6} {'DuckDB':>6} {'jeAll':>6} {'jeRes':>6} {'glUse':>6} {'glSys':>6} "
          f"{'Arrow':>6}  tags")
    for name, (rss, arrow, tags, at, al) in r["memory"].items():
        top = sorted(((v, k) for k, v in tags.items() if v >= 1e6), reverse=True)[:4]
        print(f"{name[:40]:40} {at:6.2f} {rss / 1e6:6.0f} {sum(tags.values()) / 1e6:6.0f} "
              + " ".join(f"{al[k] / 1e6:6.0f}" for k in ("je_allocated", "je_resident", "glibc_used", "glibc_system"))
              + f" {arrow / 1e6:6.0f}  " + " ".join(f"{k}={v / 1e6:.0f}" for v, k in top))


def _apply_settings(text):
    import importlib
    for item in filter(None, (text or "").split(",")):
        name, value = item.split("=")
        mod, attr = name.rsplit(".", 1)
        setattr(importlib.import_module("tracedb." + mod), attr, int(value))


def _traces(path):
    return sorted(os.path.join(path, f) for f in os.listdir(path)) if os.path.isdir(path) else [path]


def _child(mode, path, db, cores="0"):
    if int(cores):          # pinned before DuckDB starts its threads
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:int(cores)])
    from tracedb.store import db as tdb  # imports are start-up, not ingest: outside the clock
    from tracedb.ingest import ingest_file
    try:
        from tracedb.progress import phase, phase_times
    except ImportError:            # an older tracedb (a before-and-after pair): no phases
        from contextlib import nullcontext as phase
        phase_times = dict
    _apply_settings(os.environ.get("TRACEDB_BENCH_SET"))
    try:
        from tracedb.progress import _PHASES
    except ImportError:
        _PHASES = None
    watch = _PeakWatch(_PHASES)
    t, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
    if mode == "json.load":
        n = 0
        for p in _traces(path):
            with open(p, "rb") as f:
                doc = json.load(f)
            n += len(doc["traceEvents"])
            doc = None
    else:
        con = tdb.connect(db)
        if os.environ.get("TRACEDB_BENCH_SQL"):
            con.execute(os.environ["TRACEDB_BENCH_SQL"])
        phase_times()                  # (a new file's schema is not the ingest's)
        memory = _MemoryWatch(con) if os.environ.get("TRACEDB_BENCH_MEMORY") else None
        if os.path.isdir(path):
            from tracedb.ingest.parallel import ingest_traces
            ingest_traces(con, _traces(path), report=lambda r: None)
        else:
            ingest_file(con, path)
        n = tdb.scalar(con, "SELECT count(*) FROM events")
        with phase("close (checkpoint)"):
            con.close()
        memory = memory.stop() if memory else None
    secs = time.perf_counter() - t
    peak_at = watch.done() - (t - watch.t0)
    after = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime) + kids.ru_utime + kids.ru_stime
    print(json.dumps({"mode": mode, "seconds": secs, "cpu_seconds": cpu, "events": n,
                      "peak_rss_bytes": after.ru_maxrss * 1024, "child_peak_rss_bytes": kids.ru_maxrss * 1024,
                      "cores": len(os.sched_getaffinity(0)), "phases": phase_times(), "peak_at_s": peak_at,
                      "peak_after": watch.after, **({"memory": memory} if mode != "json.load" and memory else {})}))


def measure(mode, path, db="", instructions=False, cores=0, profile=False, settings="", sql="", memory=False):
    cmd = [sys.executable, __file__, "--child", mode, path, db, str(cores)]
    with tempfile.NamedTemporaryFile("r", suffix=".perf") as counts:
        if instructions:
            cmd = ["perf", "stat", "-x,", "-e", "instructions", "-o", counts.name] + cmd
        env = dict(os.environ, **({"TRACEDB_PROFILE": "1"} if profile or memory else {}),
                   **({"TRACEDB_BENCH_MEMORY": "1"} if memory else {}),
                   **({"TRACEDB_BENCH_SET": settings} if settings and mode != "json.load" else {}),
                   **({"TRACEDB_BENCH_SQL": sql} if sql and mode != "json.load" else {}))
        done = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if done.returncode:
            sys.exit(f"{' '.join(cmd[-5:])} failed:\n{done.stderr[-3000:]}")
        out = done.stdout
        r = json.loads(out.strip().splitlines()[-1])
        if instructions:
            found = [line.split(",") for line in counts.read().splitlines() if ",instructions" in line]
            r["instructions"] = int(found[0][0]) if found and found[0][0].isdigit() else None
    return r


def _opt(argv, name, default):
    return argv[argv.index(name) + 1] if name in argv else default


def main(argv):
    if argv[:1] == ["--child"]:
        return _child(*argv[1:5])
    if {"-h", "--help"} & set(argv):
        return print(__doc__.strip())
    valued = {"--cores", "--repeat", "--keep", "--set", "--label", "--sql"}
    files = [a for i, a in enumerate(argv) if not a.startswith("-") and (i == 0 or argv[i - 1] not in valued)]
    unknown = [a for a in argv if a.startswith("-") and a not in
               ("--skip-json-load", "--instructions", "--profile", "--memory") and a not in valued]
    if len(files) != 1 or unknown:
        sys.exit(__doc__.strip())
    if not os.path.exists(files[0]):
        sys.exit(f"no such file: {files[0]}")
    path = files[0]
    size = sum(os.path.getsize(p) for p in _traces(path))
    instructions = "--instructions" in argv
    if instructions and shutil.which("perf") is None:
        sys.exit("--instructions needs Linux perf (perf stat) on PATH")
    cores = [int(c) for c in _opt(argv, "--cores", "0").split(",")]
    profile = "--profile" in argv
    rows, db_size = [], 0
    for _ in range(int(_opt(argv, "--repeat", "1"))):
        for c in cores:
            with tempfile.TemporaryDirectory() as d:
                rows.append(measure("tracedb ingest", path, os.path.join(d, "bench.duckdb"), instructions, c, profile,
                                    _opt(argv, "--set", ""), _opt(argv, "--sql", ""), "--memory" in argv))
                rows[-1]["mode"] = _opt(argv, "--label", rows[-1]["mode"])
                db_size = os.path.getsize(os.path.join(d, "bench.duckdb"))
                if "--keep" in argv:
                    shutil.move(os.path.join(d, "bench.duckdb"), _opt(argv, "--keep", ""))
        if "--skip-json-load" not in argv:
            rows.append(measure("json.load", path, instructions=instructions))
    print(f"input: {path} ({size / 1e6:.0f} MB); database file {db_size / 1e6:.0f} MB")
    print(f"{'what':16} {'cores':>5} {'seconds':>8} {'cpu s':>8} {'MB/s':>8} {'events/s':>11} {'peak RSS MB':>12}"
          f" {'workers MB':>10} {'x json.load':>11} {'peak at s':>9}" + (f" {'G instr':>8}" if instructions else ""))
    loads = [r for r in rows if r["mode"] == "json.load"]
    for i, r in enumerate(rows):
        g = r.get("instructions")
        pair = next((j for j in rows[i:] if j["mode"] == "json.load"), None)   # this round's json.load
        ratio = f"{pair['seconds'] / r['seconds']:11.2f}" if pair and r["mode"] != "json.load" else f"{'':11}"
        print(f"{r['mode']:16} {r['cores']:5d} {r['seconds']:8.2f} {r['cpu_seconds']:8.2f} {size / 1e6 / r['seconds']:8.1f} "
              f"{r['events'] / r['seconds']:11.0f} {r['peak_rss_bytes'] / 1e6:12.0f} "
              f"{r['child_peak_rss_bytes'] / 1e6:10.0f} {ratio} "
              + (f"{r['peak_at_s']:9.2f}" if r["mode"] != "json.load" else f"{'':9}")
              + ((f" {g / 1e9:8.1f}" if g else f" {'?':>8}") if instructions else ""))
    if profile:
        runs = [r for r in rows if r["mode"] != "json.load"]
        for r in runs:         # where the peak RSS was: the phases ended by then (times each)
            print(f"{r['cores']} cores: peak RSS {r['peak_rss_bytes'] / 1e6:.0f} MB at {r['peak_at_s']:.2f} s, "
                  "after: " + ", ".join(f"{k.split(' (')[0]} x{n}" for k, n in r.get("peak_after", {}).items()))
        names = list(dict.fromkeys(k for r in runs for k in r["phases"]))
        print("\nphases: wall s / CPU s (all threads) per run, by cores")
        print(f"{'phase':44}" + "".join(f" {str(r['cores']) + ' cores':>14}" for r in runs))
        for k in [k for k in names if any(r["phases"].get(k, (0,))[0] >= 0.01 for r in runs)]:
            print(f"{k[:44]:44}" + "".join(
                f" {r['phases'][k][0]:6.2f}/{r['phases'][k][1]:6.2f}" if k in r["phases"] else f" {'':>14}"
                for r in runs))
    for r in rows:
        if r.get("memory"):
            _print_memory(r)
    if loads and len(rows) == 2:
        print(f"speed-up over json.load: {rows[1]['seconds'] / rows[0]['seconds']:.2f}x")


if __name__ == "__main__":
    main(sys.argv[1:])
