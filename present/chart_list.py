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
    builder: str            # module.function of present/
    on_page: bool = False   # drawn in the HTML report's section of its report
    empty_why: str = None   # why it has nothing to draw, where its report cannot say (what to ingest)


_MEMORY = "GPU memory events come from torch.profiler with profile_memory=True"
CHARTS = {
    "utilization": Chart("gpu_utilization", "charts.iterations"),
    "levels": Chart("utilization_levels", "charts.levels", on_page=True),
    "kernel_issue": Chart("kernel_utilization", "charts.kernel_issue"),
    "tc_cdf": Chart("tc_issue_cdf", "charts.tc_cdf"),
    "layers": Chart("utilization_by_layer", "charts.layers", on_page=True),
    "tf_queue": Chart("queue_occupancy", "charts.queue",
                      empty_why="the TensorFlow eager queue exists only in TensorFlow traces run in async mode "
                                "(tf.config.experimental.set_synchronous_execution(False))"),
    "queue_split": Chart("queue_utilization", "charts.queue_split", on_page=True),
    "mfu": Chart("flop_utilization", "flop_charts.mfu"),
    "flops_by_layer": Chart("bwd_fwd_ratio", "flop_charts.flops_by_layer"),
    "overlap": Chart("comm_overlap", "dist_charts.overlap"),
    "skew": Chart("collective_arrivals", "dist_charts.skew"),
    "memory_batch": Chart("memory_summary", "system_charts.memory_batch", empty_why=_MEMORY),
    "memory": Chart("memory_timeline", "system_charts.memory", empty_why=_MEMORY),
    "system": Chart("system_timeline", "system_charts.system",
                    empty_why="the sampled series come from a power log or a capture folder's host samples paired "
                              "with the trace: none is paired with these runs (tracedb power-log -o p.csv -- CMD, "
                              "then tracedb ingest p.csv --pair-with RUN; or tracedb capture)"),
}
ALIASES = {"queue": "tf_queue"}      # the old names of charts


def chart_for(report, on_page=False):
    """The chart drawn from `report` (with on_page: one the HTML report draws), or None."""
    return next((name for name, c in CHARTS.items() if c.report == report and (c.on_page or not on_page)), None)
