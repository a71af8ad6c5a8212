"""Walk every metric of every action of a report with ncu_report, printing
each call before it is made (to find calls that crash the module).
usage: ncu_report_walk.py REPORT OUT [MODULE_TO_IMPORT_FIRST]"""
import glob
import sys

if len(sys.argv) > 3:
    __import__(sys.argv[3])
sys.path[:0] = sorted(glob.glob("/opt/nvidia/nsight-compute/*/extras/python"))[-1:]
import ncu_report as nr  # noqa: E402

ctx = nr.load_report(sys.argv[1])
out = open(sys.argv[2], "w", buffering=1)
for r in range(ctx.num_ranges()):
    rng = ctx.range_by_idx(r)
    for a in range(rng.num_actions()):
        act = rng.action_by_idx(a)
        for name in act.metric_names():
            m = act.metric_by_name(name)
            out.write(f"{a} {name} ")
            out.write(f"has_value={m.has_value()} ")
            out.write(f"kind={m.kind()} ")
            out.write(f"unit={m.unit()!r}\n")
