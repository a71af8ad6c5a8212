"""Nothing silently empty: run names given in parameters must exist, and a report
that comes back empty says why (on stderr, as a note) when the cause is known."""
from tracedb.db import rows, scalar
from tracedb.reports import ReportError

RUN_LIST_PARAMS = ("runs",)                               # comma-separated run names
RUN_PARAMS = ("baseline", "power_run", "ncu_run", "trace_run")


def _known(con):
    return [r[0] for r in rows(con, "SELECT run FROM runs ORDER BY run")]


def check_run_names(con, report, values):
    """ReportError for a run named in a parameter that the database lacks (a typo in
    runs= would otherwise just drop that run from the result)."""
    names = []
    for p in report.params:
        v = values.get(p.name)
        if v is None or p.type.upper() != "VARCHAR":
            continue
        if p.name in RUN_LIST_PARAMS:
            names += [(p.name, n.strip()) for n in str(v).split(",") if n.strip()]
        elif p.name in RUN_PARAMS:
            names.append((p.name, str(v)))
    known = set(_known(con)) if names else set()
    for param, name in names:
        if name not in known:
            listed = ", ".join(sorted(known)[:8]) + (", ..." if len(known) > 8 else "")
            from tracedb.suggest import did_you_mean
            raise ReportError(f"report {report.name}: {param}: no run named {name!r}{did_you_mean(name, known)} "
                              f"(runs: {listed or 'none'})")


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
    """Whether iteration=all gives a run without iterations its whole-trace row: the
    parameter's doc says so ("also of a run without iterations"). Others (memory_summary,
    the energy reports) take their whole trace from the iterations' span."""
    p = report.param("iteration")
    return p is not None and "run without iterations" in p.doc
