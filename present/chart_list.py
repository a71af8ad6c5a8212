"""The charts, one registry: chart name -> the report it is drawn from, its builder
(`module.function` in present/: Arrow table -> charts.Figure or an Altair chart), and
whether the HTML report draws it beside that report's table. `tracedb chart`, its
help, the HTML report and `Result.chart()` in notebooks all read it. It is apart
from the builders so the command line lists the names without importing Altair.

To add a chart: a builder in present/ and a line here.
"""
from typing import NamedTuple


class Chart(NamedTuple):
    report: str
    builder: str          # module.function of present/
    on_page: bool = False  # drawn in the HTML report's section of its report


CHARTS = {
    "levels": Chart("utilization_levels", "charts.levels", on_page=True),
    "kernel_issue": Chart("kernel_utilization", "charts.kernel_issue"),
    "tc_cdf": Chart("tc_issue_cdf", "charts.tc_cdf"),
    "layers": Chart("utilization_by_layer", "charts.layers", on_page=True),
    "queue": Chart("queue_occupancy", "charts.queue"),
    "queue_split": Chart("queue_utilization", "charts.queue_split", on_page=True),
    "mfu": Chart("flop_utilization", "flop_charts.mfu"),
    "flops_by_layer": Chart("bwd_fwd_ratio", "flop_charts.flops_by_layer"),
    "overlap": Chart("comm_overlap", "dist_charts.overlap"),
    "skew": Chart("collective_arrivals", "dist_charts.skew"),
    "memory_batch": Chart("memory_summary", "system_charts.memory_batch"),
    "memory": Chart("memory_timeline", "system_charts.memory"),
    "system": Chart("system_timeline", "system_charts.system"),
}


def chart_for(report, on_page=False):
    """The chart drawn from `report` (with on_page: one the HTML report draws), or None."""
    return next((name for name, c in CHARTS.items() if c.report == report and (c.on_page or not on_page)), None)
