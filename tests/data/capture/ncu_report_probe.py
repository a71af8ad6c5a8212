"""Print what NVIDIA's ncu_report module exposes for a report (API check on the device)."""
import glob
import json
import sys

sys.path[:0] = sorted(glob.glob("/opt/nvidia/nsight-compute/*/extras/python"))[-1:]
import ncu_report  # noqa: E402

ctx = ncu_report.load_report(sys.argv[1])
out = {"ctx": [a for a in dir(ctx) if not a.startswith("__")]}
rng = ctx.range_by_idx(0)
out["range"] = [a for a in dir(rng) if not a.startswith("__")]
act = rng.action_by_idx(0)
out["action"] = [a for a in dir(act) if not a.startswith("__")]
out["IAction"] = [a for a in dir(ncu_report.IAction) if a.startswith("NameBase")]
out["names"] = {}
for nb in out["IAction"]:
    try:
        out["names"][nb] = act.name(getattr(ncu_report.IAction, nb))
    except Exception as e:  # noqa: BLE001
        out["names"][nb] = repr(e)
out["name()"] = act.name()
m = act.metric_by_name("gpu__time_duration.sum")
out["metric"] = [a for a in dir(m) if not a.startswith("__")]
metrics = {}
for n in sorted(act.metric_names()):
    mm = act.metric_by_name(n)
    rec = {"type": str(mm.metric_type()) if hasattr(mm, "metric_type") else None}
    for f in ("unit", "metric_subtype", "num_instances", "has_value", "as_double", "as_uint64", "as_string", "value"):
        try:
            rec[f] = str(getattr(mm, f)())
        except Exception as e:  # noqa: BLE001
            rec[f] = "ERR " + repr(e)[:80]
    metrics[n] = rec
out["metrics"] = metrics
out["n_ranges"] = ctx.num_ranges()
out["n_actions"] = [ctx.range_by_idx(i).num_actions() for i in range(ctx.num_ranges())]
json.dump(out, sys.stdout, indent=1)
