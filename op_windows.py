"""The op windows of a FLOP report: the time spans of the iterations it reads.

The FLOP views (schema/views/flops.sql) parse the shapes of every framework op
from its args JSON and sweep each thread's ops to find the counted ones; an
op's iteration is known only after the sweep, so a report that asks for one
iteration still reads them all (flops_by_op on a 25 M-event trace: 15-20 s).
A report whose header says `op_windows: iteration` (it reads the iterations
its `iteration` parameter picks) or `op_windows: steady` (each run's steady
iteration) runs with the DuckDB variable tracedb_op_windows set to those
iterations' spans, and the views read only the ops there (macro
flop_in_op_window; 1-2 s).

The rows of those iterations come out the same. A window is [lo, hi]: lo the
earliest start of an event that overlaps the iteration's step marker
[start_ns, marker_end_ns], hi the latest end of an event that starts in it.
Every op that holds an op of the iteration overlaps the marker, so it starts
at or after lo; every op nested in a counted op of the iteration starts before
that op's end, at or before hi; a left-out op ends before start_ns, before any
op of the iteration ends, so it neither holds one nor changes which ones are
counted. The same holds for the pass spans (autograd, optimizer) and for the
kernels launched in the iteration (kernels.iteration: the launch, else the
kernel start, in the marker). tests/test_op_windows.py compares each report
narrowed and not.
"""
import contextlib

from tracedb.db import rows, scalar

MIN_NS, MAX_NS = -(2 ** 63), 2 ** 63 - 1


def _iterations(con, report, values):
    """(run, start_ns, marker_end_ns) of the iterations the report reads; a run
    without iterations has (run, None, None): its whole trace. None when the
    report reads every iteration (iteration=all)."""
    runs = [values["run"]] if values.get("run") is not None else [
        r for (r,) in rows(con, "SELECT run FROM runs WHERE kind = 'trace' ORDER BY run")]
    iteration = values.get("iteration") if report.op_windows == "iteration" else None
    if iteration is not None and str(iteration).strip().lower() == "all":
        return None
    if iteration is not None:
        try:
            number = int(str(iteration).strip())
        except ValueError:
            return None                 # the report's SQL says what is wrong with it
        pick, args = "iteration = ?", [number]
    else:
        pick, args = ("iteration = (SELECT iteration FROM iteration_steadiness s "
                      "WHERE s.run = iterations.run AND s.steady)"), []
    out = []
    for run in runs:
        found = rows(con, f"SELECT start_ns, marker_end_ns FROM iterations WHERE run = ? AND {pick}",
                     [run] + args)
        if found:
            out.append((run, found[0][0], found[0][1]))
        elif not scalar(con, "SELECT count(*) FROM iterations WHERE run = ?", [run]):
            out.append((run, None, None))
    return out


# The FLOP views' rows (framework ops with a formula, pass spans) of a run that
# start at or before $end: their start and end, and their event id.
_OP_ROWS = """
    SELECT event_id, ts_ns, end_ns FROM flop_op_candidates WHERE run = $run AND ts_ns <= $end
    UNION ALL
    SELECT event_id, start_ns, end_ns FROM flop_pass_spans WHERE run = $run AND start_ns <= $end"""


def windows(con, report, values):
    """{run: (lo_ns, hi_ns, first_event_id, last_event_id)} of the iterations the
    report reads (module docstring), or None where it reads them all. Read with
    tracedb_op_windows unset."""
    its = _iterations(con, report, values)
    if its is None:
        return None
    out = {}
    for run, start, marker_end in its:
        if start is None:
            out[run] = (MIN_NS, MAX_NS, MIN_NS, MAX_NS)
            continue
        lo, hi = rows(con, "SELECT min(ts_ns) FILTER (end_ns >= $start), max(end_ns) FILTER (ts_ns >= $start) "
                           f"FROM ({_OP_ROWS})", {"run": run, "start": start, "end": marker_end})[0]
        lo = start if lo is None else min(start, lo)
        hi = marker_end if hi is None else max(marker_end, hi)
        first, last = rows(con, f"SELECT min(event_id), max(event_id) FROM ({_OP_ROWS}) WHERE ts_ns >= $lo",
                           {"run": run, "lo": lo, "end": hi})[0]
        out[run] = (lo, hi, first, last)
    return out


def _kernel_ids(con, found):
    """(first, last) kernel id of the kernels launched (else started) in the
    windows, over every run."""
    pairs = [rows(con, "SELECT min(kernel_id), max(kernel_id) FROM kernels "
                       "WHERE run = $run AND coalesce(launch_ts_ns, ts_ns) BETWEEN $lo AND $hi",
                  {"run": run, "lo": w[0], "hi": w[1]})[0] for run, w in found.items()]
    pairs = [p for p in pairs if p[0] is not None]
    return (min(p[0] for p in pairs), max(p[1] for p in pairs)) if pairs else (0, -1)


@contextlib.contextmanager
def narrowed(con, report, values):
    """The report's SQL runs with tracedb_op_windows set: the windows by run, and
    outer bounds (times, event ids, kernel ids) that span them all."""
    found = windows(con, report, values) if report.op_windows else None
    if found is None:
        yield
        return
    first_kernel, last_kernel = _kernel_ids(con, found)
    events = [w for w in found.values() if w[2] is not None]
    con.execute("SET VARIABLE tracedb_op_windows = {"
                "'lo_ns': $lo, 'hi_ns': $hi, 'first_event_id': $fe, 'last_event_id': $le, "
                "'first_kernel_id': $fk, 'last_kernel_id': $lk, "
                "'runs': MAP(CAST($runs AS VARCHAR[]), CAST($spans AS STRUCT(lo_ns BIGINT, hi_ns BIGINT)[]))}",
                {"lo": min((w[0] for w in found.values()), default=0),
                 "hi": max((w[1] for w in found.values()), default=-1),
                 "fe": min((w[2] for w in events), default=0), "le": max((w[3] for w in events), default=-1),
                 "fk": first_kernel, "lk": last_kernel,
                 "runs": list(found), "spans": [{"lo_ns": w[0], "hi_ns": w[1]} for w in found.values()]})
    try:
        yield
    finally:
        con.execute("RESET VARIABLE tracedb_op_windows")
