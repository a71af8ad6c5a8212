"""The verdict of `tracedb diff`: the step time first, the rest explains.

A compiled GPT-2 step 46.7% faster than the eager one failed the gate because GPU
utilization fell and one kernel got slower. The gate now judges iteration_time (the
steady iteration, against twice the noise the runs' iterations show, or the 2% floor
with one iteration on a side); the other metrics explain the change and fail the gate
only when named with --fail-on (a metric's name, `kernels` for any kernel row, `all`).
"""
from ..query.reports import ReportError

STEP = "iteration_time"
KERNELS = "kernels"
ALL = "all"


def _names(rows):
    return [r["metric"] for r in rows if not r["metric"].startswith("kernel: ")]


def check_fail_on(rows, fail_on):
    """The --fail-on names, checked against the metrics diff compares."""
    known = set(_names(rows)) | {KERNELS, ALL}
    for name in fail_on or ():
        if name not in known:
            raise ReportError(f"diff: --fail-on {name!r} is not a metric of diff (one of: "
                              f"{', '.join(sorted(known))})")
    return set(fail_on or ())


def _gated(row, fail_on):
    m = row["metric"]
    return (m == STEP or ALL in fail_on or m in fail_on
            or (KERNELS in fail_on and m.startswith("kernel: ")))


def verdict(rows, base, new, threshold_pct, fail_on=()):
    """(exit status: 1 when the step time, or a metric named in fail_on, is worse; else 0,
    one summary line)."""
    fail_on = check_fail_on(rows, fail_on)
    step = next(r for r in rows if r["metric"] == STEP)
    failing = [r for r in rows if r["verdict"] == "worse" and _gated(r, fail_on)]
    explaining = [r for r in rows if r["verdict"] in ("worse", "better") and r["metric"] != STEP]
    noise = (f"noise {step['noise_pct']:.1f}% from the iterations" if step["noise_source"] == "iterations"
             else f"noise: the {step['noise_pct']:g}% floor (one iteration on a side: profile more steps)")
    head = (f"{new} vs {base}: step time {step['delta_pct']:+.1f}% ({step['verdict']}; "
            f"threshold {threshold_pct:g}%, {noise})" if step["delta_pct"] is not None
            else f"{new} vs {base}: step time not comparable")
    if explaining:
        what = ", ".join(f"{r['metric'][:40]} {r['delta_pct']:+.1f}% {r['verdict']}" for r in explaining[:4])
        head += f"; explaining: {what}{', ...' if len(explaining) > 4 else ''}"
    if failing:
        what = ", ".join(f"{r['metric'][:40]} {r['delta_pct']:+.1f}%" for r in failing[:4])
        return 1, f"{head}; WORSE beyond {threshold_pct:g}% ({what})"
    ungated = [r["metric"] for r in rows if r["verdict"] == "worse"]
    if ungated:
        head += (f"; passes: the step time decides (--fail-on {ungated[0] if not ungated[0].startswith('kernel: ') else KERNELS}"
                 " to fail on a worse metric too)")
    return 0, head
