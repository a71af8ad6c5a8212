"""Charts of the FLOP reports (entries of chart_list.CHARTS): MFU per run, and
forward vs backward FLOPs per layer type."""
import altair as alt

from .charts import plain_rows
from .humanize import D3_PCT, D3_SIG


def mfu(table):
    """Model-FLOPs utilization of each run's iteration, one bar per FLOP source (flop_utilization)."""
    data = [{"run": r["run"] if r["iteration"] is None else f"{r['run']} #{r['iteration']}",
             "source": r["source"], "mfu_pct": r["mfu_pct"], "tflops": r["achieved_tflops"],
             "dtype": r["dtype"], "peak": r["peak_tflops"]}
            for r in plain_rows(table) if r["mfu_pct"] is not None]
    return alt.Chart(alt.Data(values=data)).mark_bar().encode(
        y=alt.Y("run:N", title=None),
        yOffset="source:N",
        x=alt.X("mfu_pct:Q", title="model-FLOPs utilization, % of the dense peak"),
        color=alt.Color("source:N"),
        tooltip=["run:N", "source:N", "dtype:N", alt.Tooltip("mfu_pct:Q", format=D3_PCT),
                 alt.Tooltip("tflops:Q", format=D3_SIG, title="achieved TFLOP/s"),
                 alt.Tooltip("peak:Q", title="peak TFLOP/s")],
    ).properties(title="MFU per run", width=420, height=40 * max(1, len({d["run"] for d in data})))


def flops_by_layer(table):
    """Forward and backward FLOPs per layer type, side by side per run (bwd_fwd_ratio)."""
    data = [{"run": r["run"], "layer_type": r["layer_type"], "source": r["source"], "pass": p,
             "gflops": r[col] / 1e9}
            for r in plain_rows(table) for p, col in (("forward", "flops_fwd"), ("backward", "flops_bwd"))
            if r[col]]
    return alt.Chart(alt.Data(values=data)).mark_bar().encode(
        x=alt.X("layer_type:N", title=None, axis=alt.Axis(labelAngle=-30)),
        xOffset=alt.XOffset("pass:N", sort=["forward", "backward"]),
        y=alt.Y("gflops:Q", title="GFLOP"),
        color=alt.Color("pass:N", sort=["forward", "backward"]),
        column=alt.Column("run:N", title=None),
        row=alt.Row("source:N", title=None),
        tooltip=["run:N", "source:N", "layer_type:N", "pass:N", alt.Tooltip("gflops:Q", format=D3_SIG)],
    ).properties(title="FLOPs per layer type, forward vs backward", width=320, height=220)
