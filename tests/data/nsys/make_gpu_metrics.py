"""Make an Nsight Systems export with sampled GPU metrics from a real one.

No public export holding GPU metrics (nsys profile --gpu-metrics-devices) was
found (README.md here), so the test data is a copy of a real committed export
(mfu_2gpu_before.sqlite.gz by default) given the two tables nsys writes for them,
with the columns of NVIDIA's SQLite export schema reference
(https://docs.nvidia.com/nsight-systems/UserGuide/index.html, "SQLite Schema Reference"
/ "GPU Metrics"):

    TARGET_INFO_GPU_METRICS (typeId, sourceId, typeName, metricId, metricName)
    GPU_METRICS (typeId, timestamp, metricId, value)

and metric names as nsys gives them (`SMs Active [Throughput %]` ...). The values
are chosen so that the per-iteration means are known by construction:

- every GPU (deviceId of the kernels) is one typeId, 0x1000 + deviceId (the GPU is
  the typeId's low byte, as NVIDIA's readers take it);
- a fixed period of 100 us (nsys's default 10 kHz) from before the first kernel to
  after the last, plus a sample at each start and end of the GPU's kernel-busy time
  (the union of its kernels' intervals), so that each sample's interval, from its
  own timestamp to the next sample (a sample's timestamp begins the period its value
  describes, as NVIDIA's gpu_metric_util_map recipe takes it), is busy throughout or
  idle throughout (the last sample, after the last kernel: idle);
- `SMs Active`: 100 over busy intervals, 0 over idle ones; `SM Issue`: 60 and 0;
  `Tensor Active`: 25 and 0. Their time-weighted mean over any window is therefore
  100, 60 and 25 x the GPU's kernel-busy share of the window;
- on the fixed period only: `DRAM Read Bandwidth` 30, `DRAM Write Bandwidth` 12
  (constant: means 30 and 12, DRAM 42), `GPC Clock Frequency [MHz]` 1755 (a metric
  that is no level: loaded, not averaged).

Usage: python make_gpu_metrics.py OUT.sqlite [SOURCE.sqlite[.gz]]
"""
import gzip
import os
import shutil
import sqlite3
import sys

PERIOD_NS = 100_000
BUSY = {"SMs Active [Throughput %]": 100, "SM Issue [Throughput %]": 60, "Tensor Active [Throughput %]": 25}
STEADY = {"DRAM Read Bandwidth [Throughput %]": 30, "DRAM Write Bandwidth [Throughput %]": 12,
          "GPC Clock Frequency [MHz]": 1755}
HERE = os.path.dirname(os.path.abspath(__file__))


def busy_intervals(con, device):
    """The union of the device's kernel intervals [start, end), in nsys's own times."""
    out = []
    for s, e in con.execute("SELECT start, end FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE deviceId = ? "
                            "ORDER BY start, end", [device]):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def make(out, source=None):
    source = source or os.path.join(HERE, "mfu_2gpu_before.sqlite.gz")
    if os.path.realpath(out) == os.path.realpath(source) or \
            (os.path.exists(out) and os.path.samefile(out, source)):
        # (out is opened for writing before the source is read: it would be emptied)
        raise ValueError(f"{out}: the output is the source export itself; give another path")
    if source.endswith(".gz"):
        with gzip.open(source, "rb") as f, open(out, "wb") as g:
            shutil.copyfileobj(f, g)
    else:
        shutil.copy(source, out)
    con = sqlite3.connect(out)
    con.execute("CREATE TABLE TARGET_INFO_GPU_METRICS (typeId INTEGER NOT NULL, sourceId INTEGER NOT NULL, "
                "typeName TEXT NOT NULL, metricId INTEGER NOT NULL, metricName TEXT NOT NULL)")
    con.execute("CREATE TABLE GPU_METRICS (typeId INTEGER NOT NULL, timestamp INTEGER, metricId INTEGER NOT NULL, "
                "value INTEGER NOT NULL)")
    names = list(BUSY) + list(STEADY)
    lo, hi = con.execute("SELECT min(start), max(end) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
    first, last = (lo // PERIOD_NS - 1) * PERIOD_NS, (hi // PERIOD_NS + 2) * PERIOD_NS
    grid = range(first, last + 1, PERIOD_NS)
    for device, in con.execute("SELECT DISTINCT deviceId FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY 1").fetchall():
        type_id = 0x1000 + device
        con.executemany("INSERT INTO TARGET_INFO_GPU_METRICS VALUES (?, ?, 'GH100', ?, ?)",
                        [(type_id, device, i, n) for i, n in enumerate(names)])
        busy = busy_intervals(con, device)
        stamps = sorted(set(grid) | {t for iv in busy for t in iv})
        rows, k = [], 0
        for t, nxt in zip(stamps, stamps[1:] + [None]):      # the value of [t, nxt): the sample at t
            while k < len(busy) and busy[k][1] <= t:
                k += 1
            inside = nxt is not None and k < len(busy) and busy[k][0] <= t and nxt <= busy[k][1]
            rows += [(type_id, t, i, v if inside else 0) for i, v in enumerate(BUSY.values())]
        rows += [(type_id, t, len(BUSY) + i, v) for t in grid for i, v in enumerate(STEADY.values())]
        con.executemany("INSERT INTO GPU_METRICS VALUES (?, ?, ?, ?)", sorted(rows, key=lambda r: (r[1], r[2])))
    con.commit()
    con.close()
    return out


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: make_gpu_metrics.py OUT.sqlite [SOURCE.sqlite[.gz]]")
    try:
        make(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
    except (ValueError, OSError) as e:       # (a source that is not there: one line, no traceback)
        sys.exit(f"make_gpu_metrics.py: {e}")
