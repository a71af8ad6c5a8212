"""Charts of the system-metric reports (chart_list.CHARTS names them): throughput
against peak memory across runs, the memory timeline, and the sampled series
on the iteration timeline. Each is drawn from one report's rows."""
import altair as alt

from ..query import reports
from .charts import plain_rows
from .humanize import D3_SIG

GIB = 1 << 30


def memory_batch(table):
    """Throughput against peak reserved memory, one point per run (memory_summary): the
    batch-size figure. samples/s when the batch size is known, else iterations/s."""
    rows = [r for r in plain_rows(table) if r["iteration_ns"]]
    per_sample = all(r["samples_per_s"] is not None for r in rows)
    data = [{"run": r["run"], "device": r["device"], "peak_gib": r["peak_reserved_bytes"] / GIB,
             "throughput": r["samples_per_s"] if per_sample else 1e9 / r["iteration_ns"],
             "batch": r["batch_size"]} for r in rows]
    base = alt.Chart(alt.Data(values=data)).encode(
        x=alt.X("peak_gib:Q", title="peak reserved GPU memory, GiB"),
        y=alt.Y("throughput:Q", title="samples/s" if per_sample else "iterations/s"),
        tooltip=["run:N", "batch:Q", alt.Tooltip("peak_gib:Q", format=D3_SIG), alt.Tooltip("throughput:Q", format=D3_SIG)])
    return alt.layer(base.mark_point(filled=True, size=70).encode(color=alt.Color("run:N", legend=None)),
                     base.mark_text(dx=6, align="left").encode(text="run:N")).properties(
        title="Throughput against peak memory", width=420, height=280)


def memory(table):
    """Allocated and reserved memory over time per run and device (memory_timeline)."""
    data = []
    for r in plain_rows(table):
        for col, label in (("allocated_bytes", "allocated"), ("reserved_bytes", "reserved")):
            data.append({"series": f"{r['run']} cuda:{r['device']}", "kind": label, "ms": r["rel_ns"] / 1e6,
                         "gib": r[col] / GIB if r[col] is not None else None})
    return alt.Chart(alt.Data(values=data)).mark_line(interpolate="step-after").encode(
        x=alt.X("ms:Q", title="time from the window's start, ms"),
        y=alt.Y("gib:Q", title="GPU memory, GiB"),
        color=alt.Color("series:N", title=None), strokeDash=alt.StrokeDash("kind:N", title=None),
    ).properties(title="GPU memory over time", width=520, height=260)


def system(table):
    """Power, SM clock, utilization and CPU series, one panel each, iterations shaded (system_timeline)."""
    rows = plain_rows(table)
    if not rows:
        raise reports.ReportError("chart system: no samples in this window (pair a sampler log with the run)")
    data = [{"run": r["run"], "ms": r["rel_ns"] / 1e6, "quantity": r["quantity"], "value": r["value"],
             "iteration": None if r["iteration"] is None else f"iteration {r['iteration']}"} for r in rows]
    return alt.Chart(alt.Data(values=data)).mark_line(point=alt.OverlayMarkDef(size=8)).encode(
        x=alt.X("ms:Q", title="time from the window's start, ms"),
        y=alt.Y("value:Q", title=None, scale=alt.Scale(zero=False)),
        color=alt.Color("iteration:N", title="iteration"), detail="run:N",
    ).properties(width=520, height=90).facet(
        row=alt.Row("quantity:N", title=None), title="Sampled system metrics on the iteration timeline"
    ).resolve_scale(y="independent")
