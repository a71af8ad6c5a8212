"""Charts of the distributed reports: communication overlap per rank, and the
arrival skew of collectives as a heat map (rank x collective call)."""
import altair as alt

from .charts import plain_rows
from .humanize import D3_PCT, D3_SIG


def overlap(table):
    """Communication time per rank, split into the part hidden under compute and the
    exposed part, one bar per rank (and iteration) (comm_overlap)."""
    data = []
    rows = plain_rows(table)
    several = len({r["job"] for r in rows}) > 1        # one bar per job and rank, never two jobs' rank 0 in one
    for r in rows:
        label = f"rank {r['rank']}" + ("" if r["iteration"] is None else f" #{r['iteration']}") \
            if r["rank"] is not None else r["run"]
        if several and r["rank"] is not None:
            label = f"{r['job']} {label}"
        for part, col in (("overlapped by compute", "overlap_ns"), ("exposed", "exposed_ns")):
            data.append({"rank": label, "part": part, "ms": r[col] / 1e6, "overlap_pct": r["overlap_pct"],
                         "job": r["job"]})
    return alt.Chart(alt.Data(values=data)).mark_bar().encode(
        y=alt.Y("rank:N", title=None),
        x=alt.X("ms:Q", stack="zero", title="communication time, ms"),
        color=alt.Color("part:N", title=None, sort=["overlapped by compute", "exposed"]),
        tooltip=["job:N", "rank:N", "part:N", alt.Tooltip("ms:Q", format=D3_SIG),
                 alt.Tooltip("overlap_pct:Q", format=D3_PCT, title="overlap %")],
    ).properties(title="Communication overlapped by compute, per rank", width=420)


def skew(table):
    """Arrival of each rank at each collective call, after the first rank (collective_arrivals)."""
    data = [{"call": f"{r['process_group']}:{r['seq']} {r['collective']}", "order": (r["process_group"], r["seq"]),
             "rank": r["rank"], "us": r["arrival_ns"] / 1e3, "job": r["job"]} for r in plain_rows(table)]
    calls = [d["call"] for d in sorted(data, key=lambda d: (str(d["order"][0]), d["order"][1]))]
    order = list(dict.fromkeys(calls))
    for d in data:
        del d["order"]
    chart = alt.Chart(alt.Data(values=data)).mark_rect().encode(
        x=alt.X("call:N", sort=order, title="collective call (process group:seq)", axis=alt.Axis(labels=len(order) <= 60)),
        y=alt.Y("rank:O", title="rank"),
        color=alt.Color("us:Q", title="arrival after the first rank, µs", scale=alt.Scale(scheme="viridis")),
        tooltip=["job:N", "call:N", "rank:O", alt.Tooltip("us:Q", format=D3_SIG)],
    )
    if len({d["job"] for d in data}) > 1:       # several jobs: one heat map each, never merged
        return chart.properties(width=max(300, min(900, 8 * len(order)))).facet(
            row=alt.Row("job:N", title=None)).resolve_scale(x="independent", y="independent").properties(
            title="Collective arrival skew, per job")
    return chart.properties(title="Collective arrival skew", width=max(300, min(900, 8 * len(order))))
