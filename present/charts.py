"""Charts of the saved reports (Altair specs; PNG, SVG and HTML through vl-convert).

Each chart is drawn from one report's output, never from a separate query:
report rows (Arrow) -> polars -> a small Altair spec over a named dataset ->
Vega-Lite JSON with the dataset's rows written by polars -> html / png / svg.
No Python dict per row is built and the (possibly large) data is never run
through Altair's schema validation: only the spec is. A builder returns either a
Figure (spec + polars frames) or a plain Altair chart (small data inline).
"""
import json
import sys
import time

import altair as alt
import polars as pl
import pyarrow as pa

from ..query import reports
from .chart_list import ALIASES, CHARTS, chart_for  # noqa: F401 (the registry, as charts.CHARTS and charts.chart_for)
from .humanize import D3_PCT, D3_SIG

LEVELS = [("gpu_util_pct", "GPU"), ("smsp_active_pct_iter", "SMSP active"),
          ("issue_slot_pct_iter", "SMSP issue slot"), ("tc_active_pct_iter", "TC active"),
          ("tc_issue_pct_iter", "TC issue slot")]
DATA = "rows"                    # name of a Figure's dataset in the spec


class Figure:
    """An Altair spec over named datasets, with the datasets as polars frames."""

    def __init__(self, chart, data):
        self.chart = chart
        self.data = data          # dataset name -> polars DataFrame

    def spec_json(self):
        """Vega-Lite JSON: the validated spec, with the rows of each dataset as
        written by polars (no Python objects per row)."""
        spec = self.chart.to_dict()
        spec.pop("datasets", None)
        head = json.dumps(spec)[:-1]
        sets = ", ".join(f"{json.dumps(name)}: {df.write_json()}" for name, df in self.data.items())
        return f'{head}, "datasets": {{{sets}}}}}'

    def to_dict(self):
        """The spec as a dict; a one-dataset chart has its rows in data.values."""
        spec = json.loads(self.spec_json())
        if len(self.data) == 1 and spec.get("data", {}).get("name") in self.data:
            spec["data"] = {"values": spec.pop("datasets")[spec["data"]["name"]]}
        return spec

    def rows(self, name=DATA):
        return self.data[name]

    def _repr_mimebundle_(self, include=None, exclude=None):
        return {"application/vnd.vegalite.v6+json": self.to_dict(),
                "text/plain": f"<tracedb chart: {', '.join(f'{n} ({len(d)} rows)' for n, d in self.data.items())}>"}


def _frame(table: pa.Table) -> pl.DataFrame:
    """Report rows as polars, DECIMAL as float (Vega-Lite reads numbers)."""
    df = pl.from_arrow(table)
    return df.with_columns([pl.col(c).cast(pl.Float64) for c, t in df.schema.items() if isinstance(t, pl.Decimal)])


def plain_rows(table: pa.Table):
    """Report rows as dicts, DECIMAL as float: the small tables charts put inline."""
    from decimal import Decimal
    return [{k: float(v) if isinstance(v, Decimal) else v for k, v in r.items()} for r in table.to_pylist()]


def _named(chart_fn, df):
    """An Altair chart over the named dataset, and the Figure holding df."""
    return Figure(chart_fn(alt.Chart(alt.NamedData(DATA))), {DATA: df})


def levels(table):
    """Utilization levels of each run's iteration as grouped bars (utilization_levels)."""
    df = _frame(table)
    long = pl.concat([df.select(pl.col("run"), pl.lit(label).alias("level"), pl.lit(i).alias("order"),
                                pl.col(col).cast(pl.Float64).alias("pct"))
                      for i, (col, label) in enumerate(LEVELS)]).drop_nulls("pct")
    return _named(lambda c: c.mark_bar().encode(
        x=alt.X("level:N", sort=[label for _, label in LEVELS], title=None, axis=alt.Axis(labelAngle=0)),
        xOffset="run:N",
        y=alt.Y("pct:Q", title="% of the iteration"),
        color=alt.Color("run:N"),
        tooltip=["run:N", "level:N", alt.Tooltip("pct:Q", format=D3_PCT)],
    ).properties(title="Utilization levels", width=420, height=260), long)


GRID = 101       # density evaluated at 0, 1, ..., 100 %


def density(df, value, weight):
    """Gaussian kernel density of `value` (0..100) per run, each kernel weighted by
    `weight` (a column, or None for one per kernel); bandwidth by Silverman's rule
    on the weighted spread (at least 1 point). Columns: run, pct, density, mean."""
    w = pl.col(weight).cast(pl.Float64) if weight else pl.lit(1.0)
    d = df.select("run", pl.col(value).cast(pl.Float64).alias("x"), w.alias("w")).drop_nulls()
    stats = d.group_by("run").agg(
        (pl.col("w") * pl.col("x")).sum().truediv(pl.col("w").sum()).alias("mean"),
        pl.col("w").sum().alias("sw"), (pl.col("w") ** 2).sum().alias("sw2"),
    )
    d = d.join(stats, on="run")
    spread = d.group_by("run").agg(((pl.col("w") * (pl.col("x") - pl.col("mean")) ** 2).sum()
                                    / pl.col("sw").first()).sqrt().alias("sd"))
    stats = stats.join(spread, on="run").with_columns(
        (pl.col("sw") ** 2 / pl.col("sw2")).alias("n_eff")).with_columns(
        pl.max_horizontal(pl.lit(1.0), 1.06 * pl.col("sd") * pl.col("n_eff") ** -0.2).alias("h"))
    grid = pl.DataFrame({"pct": [float(g) for g in range(GRID)]})
    dens = (d.select("run", "x", "w").join(stats.select("run", "h", "sw"), on="run").join(grid, how="cross")
            .with_columns((pl.col("w") * (-0.5 * ((pl.col("pct") - pl.col("x")) / pl.col("h")) ** 2).exp()
                           / (pl.col("h") * pl.col("sw") * (2 * 3.141592653589793) ** 0.5)).alias("k"))
            .group_by("run", "pct").agg(pl.col("k").sum().alias("density")))
    return dens.join(stats.select("run", "mean"), on="run").sort("run", "pct")


def kernel_issue(table):
    """Per-kernel issue slot utilization per run as split violins (kernel_utilization):
    left half one count per kernel, right half weighted by the kernel's time, each
    with a rule at its mean."""
    df = _frame(table)
    parts = []
    for label, weight, sign in (("per kernel", None, -1.0), ("weighted by kernel time", "dur_ns", 1.0)):
        d = density(df, "issue_slot_pct", weight).with_columns(pl.lit(label).alias("weighting"))
        top = d["density"].max() or 1.0
        parts.append(d.with_columns(
            (pl.col("density") / top * sign).alias("edge"), pl.lit(0.0).alias("axis"), pl.lit("density").alias("part")))
        means = d.group_by("run").agg(pl.col("mean").first()).with_columns(
            pl.col("mean").alias("pct"), pl.lit(label).alias("weighting"), pl.lit(None, pl.Float64).alias("density"),
            pl.lit(sign).alias("edge"), pl.lit(0.0).alias("axis"), pl.lit("mean").alias("part"))
        parts.append(means.select(parts[-1].columns))
    data = pl.concat(parts, how="vertical_relaxed")
    base = alt.Chart(alt.NamedData(DATA))
    area = base.transform_filter(alt.datum.part == "density").mark_area(orient="horizontal", opacity=0.7).encode(
        y=alt.Y("pct:Q", title="issue slot utilization of the kernel, %", scale=alt.Scale(domain=[0, 100])),
        x=alt.X("edge:Q", title=None, axis=None), x2="axis:Q",
        color=alt.Color("weighting:N", title=None, legend=alt.Legend(orient="bottom")),
        tooltip=["run:N", "weighting:N", alt.Tooltip("pct:Q", format=D3_PCT), alt.Tooltip("density:Q", format=D3_SIG)])
    mean = base.transform_filter(alt.datum.part == "mean").mark_rule(strokeWidth=2, color="black").encode(
        y="pct:Q", x="edge:Q", x2="axis:Q",
        tooltip=["run:N", "weighting:N", alt.Tooltip("mean:Q", format=D3_PCT, title="mean, %")])
    chart = alt.layer(area, mean).properties(width=140, height=280).facet(
        column=alt.Column("run:N", title=None)).properties(
        title="Issue slot utilization per kernel (left) and weighted by kernel time (right); rule: mean")
    return Figure(chart, {DATA: data})


def tc_cdf(table):
    """Cumulative kernel time over TC issue slot utilization (tc_issue_cdf)."""
    df = _frame(table).select("run", "tc_issue_pct", pl.col("cum_time_share_pct").alias("cum"))
    return _named(lambda c: c.mark_line(interpolate="step-after", point=True).encode(
        x=alt.X("tc_issue_pct:Q", title="TC issue slot utilization of the kernel, %"),
        y=alt.Y("cum:Q", title="share of kernel time, % (cumulative)", scale=alt.Scale(domain=[0, 100])),
        color="run:N",
    ).properties(title="Kernel time by tensor core issue slot utilization", width=420, height=260), df)


def layers(table):
    """Time share by layer type per run as stacked bars (utilization_by_layer); one
    colour per layer type (up to 20 before any repeats)."""
    df = _frame(table).select("run", "layer_type", pl.col("time_share_pct").alias("share"))
    types = sorted(df["layer_type"].drop_nulls().unique().to_list())
    scheme = "tableau10" if len(types) <= 10 else "tableau20"
    return _named(lambda c: c.mark_bar().encode(
        y=alt.Y("run:N", title=None),
        x=alt.X("share:Q", title="share of GPU activity time, %", stack="zero"),
        color=alt.Color("layer_type:N", title="layer type", scale=alt.Scale(domain=types, scheme=scheme)),
        tooltip=["run:N", "layer_type:N", alt.Tooltip("share:Q", format=D3_PCT)],
    ).properties(title="Time by layer type", width=420, height=40 * max(1, df["run"].n_unique())), df)


def queue(table):
    """Eager queue occupancy over time as a step line, iterations shaded, one panel
    per run with its own time axis (queue_occupancy). Time runs from each run's
    first change."""
    df = _frame(table).filter(pl.col("ts_ns").is_not_null())
    if df.is_empty():
        raise reports.ReportError("chart tf_queue: no TensorFlow eager queue in these runs (sync mode)")
    df = df.with_columns(((pl.col("ts_ns") - pl.col("ts_ns").min().over("run")) / 1e6).alias("ms"))
    line = df.select("run", "ms", pl.col("nodes_waiting").alias("waiting"), pl.lit("line").alias("part"),
                     pl.lit(None, pl.Utf8).alias("iteration"), pl.lit(None, pl.Float64).alias("end"))
    bands = (df.filter(pl.col("iteration").is_not_null()).group_by("run", "iteration")
             .agg(pl.col("ms").min().alias("ms"), pl.col("ms").max().alias("end"))
             .select("run", "ms", pl.lit(None, pl.Int64).alias("waiting"), pl.lit("band").alias("part"),
                     pl.format("iteration {}", pl.col("iteration")).alias("iteration"), "end"))
    data = pl.concat([line, bands], how="vertical_relaxed")
    base = alt.Chart(alt.NamedData(DATA))
    band = base.transform_filter(alt.datum.part == "band").mark_rect(opacity=0.2).encode(
        x=alt.X("ms:Q", title="time from the run's first enqueue, ms"), x2="end:Q",
        color=alt.Color("iteration:N", title="shaded"))
    step = base.transform_filter(alt.datum.part == "line").mark_line(interpolate="step-after", color="black").encode(
        x="ms:Q", y=alt.Y("waiting:Q", title="nodes waiting"))
    chart = alt.layer(band, step).properties(width=560, height=140).facet(
        row=alt.Row("run:N", title=None, header=alt.Header(labelAngle=0, labelAlign="left"))).resolve_scale(
        x="independent", y="independent").properties(title="Eager scheduling queue occupancy")
    return Figure(chart, {DATA: data})


def queue_split(table):
    """Time split by queue state and what runs, stacked per iteration (queue_utilization)."""
    df = _frame(table).select(pl.format("{} #{}", "run", "iteration").alias("run_iteration"),
                              pl.col("queue_state").alias("state"), "category", pl.col("share_pct").alias("share"))
    return _named(lambda c: c.mark_bar().encode(
        y=alt.Y("run_iteration:N", title=None),
        x=alt.X("share:Q", stack="zero", title="share of the iteration, %"),
        color=alt.Color("category:N"),
        opacity=alt.Opacity("state:N", title="queue", sort=["non_empty", "empty", "no_queue"]),
        tooltip=["state:N", "category:N", alt.Tooltip("share:Q", format=D3_PCT)],
    ).properties(title="Time by queue state and activity", width=420), df)


def builder(name):
    """The builder function of chart `name` (chart_list.CHARTS)."""
    import importlib
    module, function = CHARTS[name].builder.rsplit(".", 1)
    return getattr(importlib.import_module(f".{module}", __package__), function)


def iterations(table):
    """GPU utilization and iteration time of each iteration, one panel per run
    (gpu_utilization): bars of the share of the iteration with a kernel running,
    the iteration time and kernel-busy time in the tooltip, in ms."""
    df = _frame(table).select("run", pl.col("iteration").cast(pl.Utf8).alias("iteration"),
                              pl.col("gpu_util_pct").alias("util"), (pl.col("total_ns") / 1e6).alias("ms"),
                              (pl.col("kernel_busy_ns") / 1e6).alias("busy_ms"), "steady")
    return _named(lambda c: c.mark_bar().encode(
        x=alt.X("iteration:N", title="iteration", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("util:Q", title="GPU utilization, % of the iteration", scale=alt.Scale(domain=[0, 100])),
        color=alt.Color("steady:N", title="steady"),
        column=alt.Column("run:N", title=None),
        tooltip=["run:N", "iteration:N", alt.Tooltip("util:Q", format=D3_PCT, title="GPU utilization, %"),
                 alt.Tooltip("ms:Q", format=D3_SIG, title="iteration time, ms"),
                 alt.Tooltip("busy_ms:Q", format=D3_SIG, title="kernel busy, ms")],
    ).properties(title="GPU utilization per iteration", width=220, height=220).resolve_scale(x="independent"), df)


def from_table(name, table, why=None):
    """The chart `name` over rows of its report already run (a Figure)."""
    name = ALIASES.get(name, name)
    if table.num_rows == 0:
        why = CHARTS[name].empty_why if why in (None, "nothing matched these parameters") else why
        raise reports.ReportError(f"chart {name}: report {CHARTS[name][0]} returned no rows"
                                  + (f": {why}" if why else " for these parameters"))
    chart = builder(name)(table)
    if not isinstance(chart, Figure):       # a builder that returns a plain Altair chart
        chart = Figure(chart, {})
    if caveat := reports.caveat_of(table):  # its counters come from a pairing kept by --force
        title = chart.chart.title if isinstance(getattr(chart.chart, "title", None), str) else name
        chart.chart = chart.chart.properties(title=alt.TitleParams(text=title, subtitle=f"caveat: {caveat}"))
    return chart


def build(con, name, params=None):
    """The chart `name` over its report's rows for params."""
    name = ALIASES.get(name, name)
    if name not in CHARTS:
        from ..suggest import did_you_mean
        raise reports.ReportError(f"no chart named {name!r}{did_you_mean(name, CHARTS)} (charts: {', '.join(CHARTS)})")
    table = reports.run(con, CHARTS[name][0], params or {})
    why = None
    if table.num_rows == 0:
        from ..query.empty import why_empty
        report = reports.get(CHARTS[name][0])
        why = why_empty(con, report, reports.bound_params(report, params or {}))
    return from_table(name, table, why)


def save(chart, path, progress=False):
    """Write html, png, svg or json by the file's suffix (png/svg/html through vl-convert)."""
    import vl_convert as vlc
    if not isinstance(chart, Figure):
        chart = Figure(chart, {})
    suffix = str(path).rsplit(".", 1)[-1].lower()
    if suffix not in ("html", "png", "svg", "json"):
        raise ValueError(f"{path}: chart files are .html, .png, .svg or .json")
    t0 = time.monotonic()
    n = sum(len(d) for d in chart.data.values())
    if progress:
        print(f"drawing {n} rows into {path} ...", end="", file=sys.stderr, flush=True)
    spec = chart.spec_json()
    if suffix != "json":
        from .htmlsafe import drawable
        spec = drawable(spec)
    if suffix == "json":
        out = spec
    elif suffix == "svg":
        out = vlc.vegalite_to_svg(spec)
    elif suffix == "html":
        from .htmlsafe import vegalite_html
        out = vegalite_html(spec)       # the Vega runtime inlined (opens offline); no string can end its script
    else:
        out = vlc.vegalite_to_png(spec, scale=2)
    try:
        with open(path, "wb" if isinstance(out, bytes) else "w") as f:
            f.write(out)
    except OSError as e:
        raise ValueError(f"{path}: cannot write ({e.strerror})") from None
    if progress:
        print(f" {time.monotonic() - t0:.1f} s", file=sys.stderr)
