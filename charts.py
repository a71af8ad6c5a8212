"""Charts of the saved reports (Altair; PNG and SVG through vl-convert).

Each chart is drawn from one report's output, never from a separate query:
report rows (Arrow) -> Altair spec -> html / png / svg.
"""
import altair as alt

from tracedb import reports

LEVELS = [("gpu_util_pct", "GPU"), ("smsp_active_pct_iter", "SMSP active"),
          ("issue_slot_pct_iter", "SMSP issue slot"), ("tc_active_pct_iter", "TC active"),
          ("tc_issue_pct_iter", "TC issue slot")]


def _rows(table):
    """Report rows as dicts of JSON-ready values (DECIMAL -> float)."""
    from decimal import Decimal
    return [{k: float(v) if isinstance(v, Decimal) else v for k, v in r.items()} for r in table.to_pylist()]


def levels(table):
    """Utilization levels of each run's iteration as grouped bars (utilization_levels)."""
    data = [{"run": r["run"], "level": label, "order": i, "pct": r[col]}
            for r in _rows(table) for i, (col, label) in enumerate(LEVELS) if r[col] is not None]
    return alt.Chart(alt.Data(values=data)).mark_bar().encode(
        x=alt.X("level:N", sort=[label for _, label in LEVELS], title=None, axis=alt.Axis(labelAngle=0)),
        xOffset="run:N",
        y=alt.Y("pct:Q", title="% of the iteration"),
        color=alt.Color("run:N"),
        tooltip=["run:N", "level:N", alt.Tooltip("pct:Q", format=".2f")],
    ).properties(title="Utilization levels", width=420, height=260)


def kernel_issue(table):
    """Per-kernel issue slot utilization per run as box plots (kernel_utilization)."""
    data = [{"run": r["run"], "issue_slot_pct": r["issue_slot_pct"]} for r in _rows(table)
            if r["issue_slot_pct"] is not None]
    return alt.Chart(alt.Data(values=data)).mark_boxplot(extent="min-max").encode(
        x=alt.X("run:N", title=None),
        y=alt.Y("issue_slot_pct:Q", title="issue slot utilization per kernel, %"),
        color=alt.Color("run:N", legend=None),
    ).properties(title="Per-kernel issue slot utilization", width=300, height=260)


def tc_cdf(table):
    """Cumulative kernel time over TC issue slot utilization (tc_issue_cdf)."""
    data = [{"run": r["run"], "tc_issue_pct": r["tc_issue_pct"], "cum": r["cum_time_share_pct"]}
            for r in _rows(table)]
    return alt.Chart(alt.Data(values=data)).mark_line(interpolate="step-after", point=True).encode(
        x=alt.X("tc_issue_pct:Q", title="TC issue slot utilization of the kernel, %"),
        y=alt.Y("cum:Q", title="share of kernel time, % (cumulative)", scale=alt.Scale(domain=[0, 100])),
        color="run:N",
    ).properties(title="Kernel time by tensor core issue slot utilization", width=420, height=260)


def layers(table):
    """Time share by layer type per run as stacked bars (utilization_by_layer)."""
    data = [{"run": r["run"], "layer_type": r["layer_type"], "share": r["time_share_pct"]} for r in _rows(table)]
    return alt.Chart(alt.Data(values=data)).mark_bar().encode(
        y=alt.Y("run:N", title=None),
        x=alt.X("share:Q", title="share of GPU activity time, %", stack="zero"),
        color=alt.Color("layer_type:N", title="layer type"),
        tooltip=["run:N", "layer_type:N", alt.Tooltip("share:Q", format=".2f")],
    ).properties(title="Time by layer type", width=420, height=40 * max(1, len({d["run"] for d in data})))


def queue(table):
    """Eager queue occupancy over time as a step line, iterations shaded (queue_occupancy).
    Time runs from each run's first change."""
    rows = [r for r in _rows(table) if r["ts_ns"] is not None]
    if not rows:
        raise reports.ReportError("chart queue: no queue in these runs (sync mode)")
    t0 = {}
    for r in rows:
        t0[r["run"]] = min(t0.get(r["run"], r["ts_ns"]), r["ts_ns"])
    data = [{"run": r["run"], "ms": (r["ts_ns"] - t0[r["run"]]) / 1e6, "waiting": r["nodes_waiting"]} for r in rows]
    spans = {}
    for r in rows:
        if r["iteration"] is not None:
            a, b = spans.get((r["run"], r["iteration"]), (r["ts_ns"], r["ts_ns"]))
            spans[(r["run"], r["iteration"])] = (min(a, r["ts_ns"]), max(b, r["ts_ns"]))
    shade = [{"run": k[0], "iteration": f"iteration {k[1]}", "start": (a - t0[k[0]]) / 1e6,
              "end": (b - t0[k[0]]) / 1e6} for k, (a, b) in spans.items()]
    band = alt.Chart(alt.Data(values=shade)).mark_rect(opacity=0.2).encode(
        x="start:Q", x2="end:Q", color=alt.Color("iteration:N", title="shaded"))
    line = alt.Chart(alt.Data(values=data)).mark_line(interpolate="step-after", color="black").encode(
        x=alt.X("ms:Q", title="time from the first enqueue, ms"), y=alt.Y("waiting:Q", title="nodes waiting"),
        detail="run:N", strokeDash=alt.StrokeDash("run:N"))
    return alt.layer(band, line).properties(title="Eager scheduling queue occupancy", width=520, height=220)


def queue_split(table):
    """Time split by queue state and what runs, stacked per iteration (queue_utilization)."""
    data = [{"run_iteration": f"{r['run']} #{r['iteration']}", "state": r["queue_state"],
             "category": r["category"], "share": r["share_pct"]} for r in _rows(table)]
    return alt.Chart(alt.Data(values=data)).mark_bar().encode(
        y=alt.Y("run_iteration:N", title=None),
        x=alt.X("share:Q", stack="zero", title="share of the iteration, %"),
        color=alt.Color("category:N"),
        opacity=alt.Opacity("state:N", title="queue", sort=["non_empty", "empty", "no_queue"]),
        tooltip=["state:N", "category:N", alt.Tooltip("share:Q", format=".2f")],
    ).properties(title="Time by queue state and activity", width=420)


# chart name -> (report it is drawn from, builder)
CHARTS = {
    "levels": ("utilization_levels", levels),
    "kernel_issue": ("kernel_utilization", kernel_issue),
    "tc_cdf": ("tc_issue_cdf", tc_cdf),
    "layers": ("utilization_by_layer", layers),
    "queue": ("queue_occupancy", queue),
    "queue_split": ("queue_utilization", queue_split),
}


def build(con, name, params=None):
    """The Altair chart `name` over its report's rows for params."""
    if name not in CHARTS:
        raise reports.ReportError(f"no chart named {name!r} (charts: {', '.join(CHARTS)})")
    report, builder = CHARTS[name]
    table = reports.run(con, report, params or {})
    if table.num_rows == 0:
        raise reports.ReportError(f"chart {name}: report {report} returned no rows for these parameters")
    return builder(table)


def save(chart, path):
    """Write html, png or svg by the file's suffix (png/svg through vl-convert)."""
    suffix = str(path).rsplit(".", 1)[-1].lower()
    if suffix not in ("html", "png", "svg", "json"):
        raise ValueError(f"{path}: chart files are .html, .png, .svg or .json")
    if suffix == "html":        # the Vega runtime inlined: the page opens offline
        from tracedb.html_report import save_chart
        return save_chart(chart, path)
    chart.save(str(path), **({"scale_factor": 2} if suffix == "png" else {}))
