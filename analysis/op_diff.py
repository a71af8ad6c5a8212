"""`tracedb diff BASE NEW --by op`: the framework ops of two runs side by side, on
each run's steady iteration (the ops report, level op): calls, the GPU time each op
launched itself (gpu_self_ns: the activity of its own runtime calls, so that the ops'
times add up without counting a kernel twice) and its self CPU time, the change,
and a verdict; the largest change in GPU time first (Holistic Trace Analysis's
trace diff, per op)."""
import pyarrow as pa

from ..query import reports
from ..store.sql import rows
from ..query.reports import ReportError

COLUMNS = [("op", pa.string()), ("base_calls", pa.int64()), ("new_calls", pa.int64()),
           ("base_gpu_ns", pa.int64()), ("new_gpu_ns", pa.int64()), ("delta_gpu_ns", pa.int64()),
           ("delta_gpu_pct", pa.float64()), ("base_cpu_self_ns", pa.int64()), ("new_cpu_self_ns", pa.int64()),
           ("delta_cpu_self_ns", pa.int64()), ("verdict", pa.string())]


def _ops(con, run):
    out = {}
    for r in reports.run(con, "ops", {"run": run}).to_pylist():
        if r["level"] == "op":
            out[r["name"]] = r
    return out


def compare(con, base, new, threshold_pct=5.0):
    """Rows (dicts with COLUMNS) of each op of base or new, the largest change first.
    verdict: new | gone (the op runs in one run only), faster | slower (its GPU time,
    or its self CPU time for an op that launches nothing, changed by more than
    threshold_pct), else same."""
    for r in (base, new):
        if not rows(con, "SELECT 1 FROM runs WHERE run = ? AND kind = 'trace'", [r]):
            from ..suggest import run_hint
            raise ReportError(f"diff: no trace run named {r!r} in the database{run_hint(con, r)}")
    b, n = _ops(con, base), _ops(con, new)
    out = []
    for op in sorted(set(b) | set(n)):
        x, y = b.get(op), n.get(op)
        bg, ng = (x or {}).get("gpu_self_ns") or 0, (y or {}).get("gpu_self_ns") or 0
        bc, nc = (x or {}).get("cpu_self_ns") or 0, (y or {}).get("cpu_self_ns") or 0
        if x is None or y is None:
            verdict = "new" if x is None else "gone"
        else:
            old, cur = (bg, ng) if bg or ng else (bc, nc)
            change = 100.0 * (cur - old) / old if old else (0.0 if cur == old else float("inf"))
            verdict = "same" if abs(change) <= threshold_pct else "slower" if change > 0 else "faster"
        out.append({"op": op, "base_calls": (x or {}).get("calls") or 0, "new_calls": (y or {}).get("calls") or 0,
                    "base_gpu_ns": bg, "new_gpu_ns": ng, "delta_gpu_ns": ng - bg,
                    "delta_gpu_pct": 100.0 * (ng - bg) / bg if bg else None,
                    "base_cpu_self_ns": bc, "new_cpu_self_ns": nc, "delta_cpu_self_ns": nc - bc,
                    "verdict": verdict})
    out.sort(key=lambda r: (-abs(r["delta_gpu_ns"]), -abs(r["delta_cpu_self_ns"]), r["op"]))
    return out


def table(found):
    return pa.table({c: pa.array([r[c] for r in found], t) for c, t in COLUMNS})


def summary(found, base, new, threshold):
    count = {v: sum(1 for r in found if r["verdict"] == v) for v in ("slower", "faster", "new", "gone", "same")}
    gpu = sum(r["delta_gpu_ns"] for r in found)
    return (f"{new} against {base}, by op: {count['slower']} slower, {count['faster']} faster, {count['new']} new, "
            f"{count['gone']} gone, {count['same']} within {threshold:g}%; GPU time launched by ops "
            f"{'+' if gpu >= 0 else '-'}{abs(gpu) / 1e6:.3f} ms")
