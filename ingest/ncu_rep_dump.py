"""Dump a .ncu-rep to CSV with NVIDIA's ncu_report module; run as a script.

It runs in its own process on purpose: ncu_report crashes (segfault in
IMetric.unit) in a process that has loaded pyarrow or duckdb first, as seen
with Nsight Compute 2025.3.1 on an H200. So this file imports the standard
library and ncu_report only, never tracedb.

usage: python ncu_rep_dump.py MODULE_DIR REPORT OUT_DIR
writes OUT_DIR/identity.csv (kernel_id, name, context, stream, block_size,
grid_size, device) and OUT_DIR/values.csv (kernel_id, metric, unit, value_text);
the NVTX ranges around a kernel (a report profiled with --nvtx) go to values.csv
under the raw CSV export's two range columns, so the matcher reads the step from
either form alike (schema/match/nvtx_step.sql).
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


# the columns `ncu --import --csv --page raw` gives the ranges of each kind
PUSH_POP = "thread Domain:Push/Pop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg"
START_END = "Id:Domain:Start/Stop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg"


def nvtx_columns(act):
    """[(column, text)] of the NVTX ranges open around the kernel, each as DOMAIN:NAME,
    space-separated; none when the report has no NVTX state. Only a hint for the
    matcher: any error reading it leaves it out, never the kernel."""
    try:
        state = act.nvtx_state()
        if state is None:
            return []
        push_pop, start_end = [], []
        for d in state.domains():
            info = state.domain_by_id(d)
            domain = info.name() or "<default domain>"
            push_pop += [f"{domain}:{n}" for n in info.push_pop_ranges()]
            start_end += [f"{domain}:{n}" for n in info.start_end_ranges()]
    except Exception:       # noqa: BLE001 -- a module without the NVTX interface
        return []
    return [(c, " ".join(v)) for c, v in ((PUSH_POP, push_pop), (START_END, start_end)) if v]


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
                for column, text in nvtx_columns(act):
                    vals.writerow([kid, column, "", text])

                def dims(p):
                    return "({}, {}, {})".format(*(metrics.get(f"launch__{p}_dim_{c}") or "1" for c in "xyz"))
                ident.writerow([kid, act.name(nr.IAction.NameBase_DEMANGLED), metrics.get("launch__context_id"),
                                metrics.get("launch__stream_id"), dims("block"), dims("grid"),
                                metrics.get("launch__device_id")])
                kid += 1


if __name__ == "__main__":
    main(*sys.argv[1:4])
