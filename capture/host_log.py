"""Host sampler beside a capture: CPU utilization per core and of the whole
machine (/proc/stat) and the profiled process's resident memory
(/proc/PID/statm), every interval, to a CSV that `tracedb ingest` reads into
`host_samples` (METHOD.md section 9: low GPU utilization with high CPU
utilization points at data loading).

Columns: timestamp_ns (epoch, the clock of the NVML sampler), cpu (core index;
empty for all cores), cpu_util_pct, rss_bytes (on the all-cores row).
"""
import csv
import os
import threading
import time
from ..errors import TracedbError

COLUMNS = ["timestamp_ns", "cpu", "cpu_util_pct", "rss_bytes"]


class HostLogError(TracedbError):
    pass


def _cpu_times():
    """{core or None: (busy, total)} jiffies from /proc/stat."""
    out = {}
    with open("/proc/stat") as f:
        for line in f:
            if not line.startswith("cpu"):
                break
            name, *vals = line.split()
            v = [int(x) for x in vals]
            idle = v[3] + (v[4] if len(v) > 4 else 0)        # idle + iowait
            total = sum(v[:8])                               # guest time is inside user already
            out[None if name == "cpu" else int(name[3:])] = (total - idle, total)
    return out


def _rss(pid):
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class HostSampler:
    """Samples the host in a background thread, one flushed CSV row per core and sample."""

    def __init__(self, output, interval_ms=50, pid=None):
        if not os.path.exists("/proc/stat"):
            raise HostLogError("the host sampler reads /proc/stat: Linux only")
        self.output, self.interval_ms, self.pid = output, interval_ms, pid or os.getpid()
        self._stop, self._thread = False, None

    def _loop(self, w, f):
        prev = _cpu_times()
        period = self.interval_ms / 1000
        nxt = time.perf_counter() + period
        while not self._stop:
            time.sleep(max(0.0, nxt - time.perf_counter()))
            nxt += period
            now, ts = _cpu_times(), time.time_ns()
            if now[None][1] <= prev[None][1]:
                continue       # no jiffy passed (a late thread catching up): the sample would say nothing
            try:
                rss = _rss(self.pid)
            except OSError:
                rss = None
            for cpu, (busy, total) in now.items():
                b0, t0 = prev.get(cpu, (busy, total))
                pct = 100.0 * (busy - b0) / (total - t0) if total > t0 else None
                w.writerow([ts, "" if cpu is None else cpu, "" if pct is None else round(pct, 2),
                            rss if cpu is None and rss is not None else ""])
            f.flush()
            prev = now

    def start(self):
        self._file = open(self.output, "w", newline="")
        w = csv.writer(self._file)
        w.writerow(COLUMNS)
        self._thread = threading.Thread(target=self._loop, args=(w, self._file), daemon=True)
        self._thread.start()
        return self

    def stop(self):
        self._stop = True
        if self._thread:
            self._thread.join()
            self._file.close()
