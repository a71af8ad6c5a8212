"""Dump a .ncu-rep to CSV with NVIDIA's ncu_report module; run as a script.

It runs in its own process on purpose: ncu_report crashes (segfault in
IMetric.unit) in a process that has loaded pyarrow or duckdb first, as seen
with Nsight Compute 2025.3.1 on an H200. So this file imports the standard
library and ncu_report only, never tracedb.

usage: python ncu_rep_dump.py MODULE_DIR REPORT OUT_DIR
writes OUT_DIR/identity.csv (kernel_id, name, context, stream, block_size,
grid_size, device) and OUT_DIR/values.csv (kernel_id, metric, unit, value_text).
"""
import csv
import os
import sys


def value_text(m, nr):
    if not m.has_value():
        return None
    kind = m.kind()
    if kind == nr.IMetric.ValueKind_STRING:
        return m.as_string()
    if kind in (nr.IMetric.ValueKind_UINT32, nr.IMetric.ValueKind_UINT64):
        return str(m.as_uint64())
    return repr(m.as_double())


def main(module_dir, report, out_dir):
    sys.path.insert(0, module_dir)
    import ncu_report as nr

    ctx = nr.load_report(report)
    with open(os.path.join(out_dir, "identity.csv"), "w", newline="") as fi, \
            open(os.path.join(out_dir, "values.csv"), "w", newline="") as fv:
        ident, vals = csv.writer(fi), csv.writer(fv)
        ident.writerow(["kernel_id", "name", "context", "stream", "block_size", "grid_size", "device"])
        vals.writerow(["kernel_id", "metric", "unit", "value_text"])
        kid = 0
        for r in range(ctx.num_ranges()):
            rng = ctx.range_by_idx(r)
            for a in range(rng.num_actions()):
                act = rng.action_by_idx(a)
                metrics = {}
                for name in act.metric_names():
                    if name.startswith("regex:"):
                        continue
                    m = act.metric_by_name(name)
                    text = value_text(m, nr)
                    metrics[name] = text
                    vals.writerow([kid, name, m.unit() or "", text])

                def dims(p):
                    return "({}, {}, {})".format(*(metrics.get(f"launch__{p}_dim_{c}") or "1" for c in "xyz"))
                ident.writerow([kid, act.name(nr.IAction.NameBase_DEMANGLED), metrics.get("launch__context_id"),
                                metrics.get("launch__stream_id"), dims("block"), dims("grid"),
                                metrics.get("launch__device_id")])
                kid += 1


if __name__ == "__main__":
    main(*sys.argv[1:4])
