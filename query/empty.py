"""Nothing silently empty: a report that comes back empty says why (on stderr, as a
note) when the cause is known."""
from ..store.sql import rows, scalar

def why_empty(con, report, values):
    """A sentence on why `report` returned no rows for `values`, when it can tell."""
    run, it = values.get("run"), values.get("iteration")
    runs = [run] if run else [r[0] for r in rows(con, "SELECT run FROM runs WHERE kind = 'trace' ORDER BY run")]
    if it not in (None, "all", "steady"):
        missing = [r for r in runs if not scalar(con, "SELECT count(*) FROM iterations WHERE run = ? AND "
                                                        "iteration::VARCHAR = ?", [r, str(it)])]
        if missing and len(missing) == len(runs):
            have = rows(con, "SELECT run, string_agg(iteration::VARCHAR, ', ' ORDER BY iteration) FROM iterations "
                             "WHERE run IN (SELECT unnest(?)) GROUP BY run ORDER BY run", [runs])
            listed = "; ".join(f"{r}: {i}" for r, i in have[:5]) or "none"
            return f"no run has iteration {it} (iterations: {listed})"
    if any(c[0] == "rank" for c in report.columns) and not scalar(con, "SELECT count(*) FROM runs WHERE rank IS NOT NULL"):
        return "no run has a rank: only traces with Kineto's distributedInfo (torch.distributed jobs) have one"
    if runs and any(p.name == "iteration" for p in report.params) and not scalar(
            con, "SELECT count(*) FROM iterations WHERE run IN (SELECT unnest(?))", [runs]):
        who = f"run {runs[0]} has no iterations" if len(runs) == 1 else "no trace run has iterations"
        why = f"{who} (no step markers: ProfilerStep#N, step_num)"
        if it == "all" and whole_trace_without_iterations(report):    # the whole trace was read, and had none
            return f"{why}, and the whole trace (iteration NULL) has nothing for this report either"
        return why
    return "nothing matched these parameters"


def whole_trace_without_iterations(report):
    """Whether iteration=all gives a run without iterations its whole-trace row (its
    header says `iteration_all: sql, whole run`). Others (memory_summary, the energy
    reports) take their whole trace from the iterations' span."""
    return report.whole_run
