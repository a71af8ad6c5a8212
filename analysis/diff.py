"""The regression gate: two runs compared metric by metric, each change weighed
against the noise the runs' own iterations show (tracedb diff).

Every number comes from a saved report (gpu_utilization, utilization_levels,
flop_utilization, energy_summary, top_kernels), on each run's steady iteration.
Noise of a metric is its relative sample standard deviation over the run's
iterations, combined over both runs (root sum of squares); with fewer than
two iterations on either side the stated floor
(2%, nsys-ai's NOISE_FLOOR_STEP_TIME_PCT) stands in and noise_source says so.
A kernel's noise is the relative standard error of its mean launch duration.
A change is better or worse only when it exceeds both the threshold and twice
the noise; otherwise unchanged.
"""
import math
import statistics

import pyarrow as pa

from ..query import reports
from ..store.sql import rows
from ..query.reports import ReportError

NOISE_FLOOR_PCT = 2.0
TOP_KERNELS = 5
LEVELS = [("smsp_active_pct_iter", "SMSP active, % of the iteration"),
          ("issue_slot_pct_iter", "issue slot utilization, % of the iteration"),
          ("tc_active_pct_iter", "tensor pipes active, % of the iteration"),
          ("tc_issue_pct_iter", "tensor issue slots, % of the iteration")]
COLUMNS = [("metric", pa.string()), ("unit", pa.string()), ("better", pa.string()), ("base", pa.float64()),
           ("new", pa.float64()), ("delta_pct", pa.float64()), ("noise_pct", pa.float64()),
           ("noise_source", pa.string()), ("verdict", pa.string()), ("note", pa.string())]


def _rel_sd(values):
    """Relative sample standard deviation, %, of values (None with fewer than 2)."""
    v = [x for x in values if x is not None]
    if len(v) < 2 or statistics.fmean(v) == 0:
        return None
    return 100.0 * statistics.stdev(v) / abs(statistics.fmean(v))


def _iterations(con, run):
    """gpu_utilization rows of run, its steady iteration first."""
    rs = reports.run(con, "gpu_utilization", {"run": run}).to_pylist()
    if not rs:
        raise ReportError(f"diff: run {run} has no iterations (step markers); diff compares trace runs")
    return sorted(rs, key=lambda r: not r["steady"])


def _optional(con, report, params):
    """Rows of a report, or (None, why) when its data (or the report) is absent."""
    if report not in reports.all_reports():
        return None, f"report {report} is not in this tracedb"
    try:
        return reports.run(con, report, params).to_pylist(), None
    except ReportError as e:
        return None, str(e)


class _Side:
    """What diff needs of one run."""

    def __init__(self, con, run, batch_size):
        self.run = run
        self.iters = _iterations(con, run)
        self.steady = self.iters[0]
        it = self.steady["iteration"]
        self.levels, self.levels_why = _optional(con, "utilization_levels", {"run": run, "iteration": str(it)})
        self.flops, self.flops_why = _optional(con, "flop_utilization", {"run": run, "iteration": str(it)})
        self.energy = []
        self.energy_why = None
        for r in self.iters:
            e, why = _optional(con, "energy_summary", {"run": run, "iteration": str(r["iteration"])})
            if e is None:
                self.energy_why = why
                break
            self.energy.append(e[0]["energy_integrated_j"] / (batch_size or 1) if e else None)
        self.kernels = {n: (total, launches, sd) for n, total, launches, sd in rows(con, """
            SELECT name, sum(dur_ns), count(*), stddev_samp(dur_ns) / avg(dur_ns)
            FROM kernels WHERE run = ? AND iteration = ? AND kind = 'kernel' GROUP BY name""", [run, it])}
        self.device = rows(con, "SELECT device_name FROM runs WHERE run = ?", [run])[0][0]


def _row(metric, unit, better, b, n, noise, source, threshold, note=None):
    if b is None or n is None:
        return dict(metric=metric, unit=unit, better=better, base=b, new=n, delta_pct=None, noise_pct=noise,
                    noise_source=source, verdict="n/a", note=note)
    delta = 100.0 * (n - b) / abs(b) if b else (0.0 if n == b else math.inf)
    band = max(threshold, 2 * (noise or 0.0))
    if abs(delta) <= band:
        verdict = "unchanged"
    else:
        worse = delta > 0 if better == "lower" else delta < 0
        verdict = "worse" if worse else "better"
    return dict(metric=metric, unit=unit, better=better, base=float(b), new=float(n), delta_pct=round(delta, 3),
                noise_pct=None if noise is None else round(noise, 3), noise_source=source, verdict=verdict,
                note=note)


def _noise(a, b, source="iterations"):
    """Combined noise of two runs' relative SDs, or the floor when either is unknown."""
    if a is None or b is None:
        return NOISE_FLOOR_PCT, "floor"
    return math.hypot(a, b), source


def compare(con, base, new, threshold_pct=5.0, batch_size=None):
    """Rows (dicts with COLUMNS) comparing run new with run base."""
    if threshold_pct < 0:
        raise ReportError("diff: --threshold must be >= 0")
    for r in (base, new):
        if not rows(con, "SELECT 1 FROM runs WHERE run = ?", [r]):
            from ..suggest import run_hint
            raise ReportError(f"diff: no run named {r!r} in the database{run_hint(con, r)}")
    b, n = _Side(con, base, batch_size), _Side(con, new, batch_size)
    out = []
    t = threshold_pct
    noise, src = _noise(_rel_sd([r["total_ns"] for r in b.iters]), _rel_sd([r["total_ns"] for r in n.iters]))
    out.append(_row("iteration_time", "ns", "lower", b.steady["total_ns"], n.steady["total_ns"], noise, src, t,
                    f"steady iterations {b.steady['iteration']} and {n.steady['iteration']}"))
    noise, src = _noise(_rel_sd([r["gpu_util_pct"] for r in b.iters]), _rel_sd([r["gpu_util_pct"] for r in n.iters]))
    out.append(_row("gpu_util", "%", "higher", b.steady["gpu_util_pct"], n.steady["gpu_util_pct"], noise, src, t))
    for col, unit in LEVELS:
        bv = b.levels[0][col] if b.levels else None
        nv = n.levels[0][col] if n.levels else None
        why = None if bv is not None and nv is not None else \
            (b.levels_why or n.levels_why or "no ncu counters matched to one of the runs")
        out.append(_row(col.removesuffix("_iter"), unit, "higher", bv, nv, NOISE_FLOOR_PCT, "floor", t, why))
    bm = b.flops[0]["mfu_pct"] if b.flops else None
    nm = n.flops[0]["mfu_pct"] if n.flops else None
    out.append(_row("mfu", "%", "higher", bm, nm, NOISE_FLOOR_PCT, "floor", t,
                    None if bm is not None and nm is not None else (b.flops_why or n.flops_why or "no FLOP count")))
    unit = "J/sample" if batch_size else "J/iteration (give --batch-size for J/sample)"
    be = b.energy[0] if b.energy else None
    ne = n.energy[0] if n.energy else None
    noise, src = _noise(_rel_sd(b.energy), _rel_sd(n.energy))
    out.append(_row("energy_per_sample" if batch_size else "energy_per_iteration", unit, "lower", be, ne, noise, src,
                    t, None if be is not None and ne is not None else (b.energy_why or n.energy_why)))
    top = sorted(b.kernels, key=lambda k: -b.kernels[k][0])[:TOP_KERNELS]
    top += [k for k in sorted(n.kernels, key=lambda k: -n.kernels[k][0])[:TOP_KERNELS] if k not in top]
    for name in top:
        bk, nk = b.kernels.get(name), n.kernels.get(name)
        se = [100.0 * k[2] / math.sqrt(k[1]) if k and k[2] is not None else None for k in (bk, nk)]
        noise, src = _noise(*se, source="launches")
        note = "only in base" if nk is None else "only in new" if bk is None else f"{bk[1]} -> {nk[1]} launches"
        out.append(_row(f"kernel: {name[:80]}", "ns per iteration", "lower", bk and bk[0], nk and nk[0],
                        noise, src if bk and nk else None, t, note))
    if b.device != n.device:
        out[0]["note"] += f"; different devices: {b.device} vs {n.device}"
    return out


def table(rows_):
    return pa.table({c: pa.array([r[c] for r in rows_], t) for c, t in COLUMNS})


def summary(rows_, base, new, threshold_pct):
    """One line: the gate's verdict."""
    worse = [r for r in rows_ if r["verdict"] == "worse"]
    better = [r for r in rows_ if r["verdict"] == "better"]
    if worse:
        what = ", ".join(f"{r['metric']} {r['delta_pct']:+.1f}%" for r in worse[:4])
        return f"{new} vs {base}: WORSE beyond {threshold_pct:g}% ({what}{', ...' if len(worse) > 4 else ''})"
    return (f"{new} vs {base}: no metric worse beyond {threshold_pct:g}% and its noise"
            + (f"; better: {', '.join(r['metric'] for r in better[:4])}" if better else ""))
