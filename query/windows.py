"""The windows of a report: the time spans of the iterations it reads, which
the views that sweep a whole run are narrowed to.

Three kinds of view are read whole by a report that asks for some iterations
only: two learn an event's iteration only after a sweep over the whole run, so
no constant iteration pushes through them, and the third is asked for each
run's steady iteration by a join:
- the FLOP views (schema/views/flops.sql) sweep each thread's ops to find the
  counted ones, after parsing every op's shapes from its args JSON
  (flops_by_op on a 25 M-event trace: 15-20 s);
- activity_segments (schema/views/queues.sql) cuts the run's timeline at
  every kernel, CPU kernel and eager-queue boundary (time_breakdown: 6 s);
- iteration_gpu_time (schema/views/base.sql) sweeps each iteration's kernels
  apart: a constant iteration reaches the kernels' scan, but a report that
  keeps each run's steady one by the steady flag, a join, has every iteration
  swept (compare_runs on a 25 M-event trace: 3.8 s).
A report whose header says `op_windows: iteration` (it reads the iterations
its `iteration` parameter picks) or `op_windows: steady` (each run's steady
iteration) runs with the DuckDB variable tracedb_op_windows set to those
iterations' op windows, and one that says `segment_windows: ...` with
tracedb_segment_windows set to their segment windows, and one that says
`gpu_time_windows: ...` with tracedb_gpu_time_iterations set to their numbers;
the views then read only what lies there (macros flop_event_in_window,
flop_kernel_in_window, in_segment_window, in_gpu_time_iteration). Unset, they
read everything.

The rows of those iterations come out the same:
- An op window is [lo, hi]: lo the earliest start of a FLOP candidate or pass
  span that overlaps the iteration's step marker [start_ns, marker_end_ns], hi
  the latest end of a candidate that starts in it. Every op or span that holds
  an op of the iteration overlaps the marker, so it starts at or after lo;
  every op nested in a counted op of the iteration starts before that op's
  end, at or before hi; a left-out op ends before start_ns, before any op of
  the iteration ends, so it neither holds one nor changes which ones are
  counted. The kernels launched in the iteration (kernels.iteration: the
  launch, else the kernel start, in the marker) launch inside it.
- A segment window is the iteration's [start_ns, end_ns]: an interval that
  does not overlap it adds nothing to the running counts inside it (it ended
  before, or starts after), and the iterations' edges still cut the timeline.
  An interval missing an end (an eager dequeue whose duration was not a
  number) is always kept: unnarrowed, its open +1 or -1 runs on to the end.
- iteration_gpu_time sweeps each (run, iteration) apart, so the kernels of the
  other iterations change nothing in it.
tests/test_windows.py compares each such report narrowed and not.
"""
import contextlib

import duckdb

from ..store.sql import rows, scalar

MIN_NS, MAX_NS = -(2 ** 63), 2 ** 63 - 1

# The FLOP views' rows (framework ops with a formula, pass spans) of a run that
# start at or before $end: their start and end, and their event id.
_OP_ROWS = """
    SELECT event_id, ts_ns, end_ns FROM flop_op_candidates WHERE run = $run AND ts_ns <= $end
    UNION ALL
    SELECT event_id, start_ns, end_ns FROM flop_pass_spans WHERE run = $run AND start_ns <= $end"""


def iterations(con, mode, values):
    """(run, start_ns, marker_end_ns, end_ns, iteration) of the iterations a report reads:
    mode iteration, those its iteration parameter picks (the steady one when
    absent); mode steady, each run's steady one. A run without iterations gives
    (run, None, None, None, None): its whole trace. None when the report reads every
    iteration (iteration=all, or a value its SQL will reject)."""
    run = values.get("run")
    asked = "SELECT CAST($run AS VARCHAR) AS run" if run is not None else "SELECT run FROM runs WHERE kind = 'trace'"
    iteration = values.get("iteration") if mode == "iteration" else None
    if iteration is not None:
        # the number as the report's SQL casts it ('3.5' is 4 there, '٣' is no number)
        number = scalar(con, "SELECT TRY_CAST(CAST(? AS VARCHAR) AS INTEGER)", [str(iteration)])
        if number is None:
            return None                 # all, or what the report's SQL says is wrong
        picked, args = "SELECT * FROM iterations WHERE iteration = $n", {"n": number}
    else:
        # every run's steady iteration in one query: a query per run worked out the
        # steadiness of every run each time (64 runs of 2,800 iterations: 25 s; 0.4 s so)
        picked, args = ("SELECT i.* FROM iterations i JOIN iteration_steadiness s USING (run, iteration) "
                        "WHERE s.steady" + (" AND s.run = $run" if run is not None else "")), {}
    if run is not None:
        args["run"] = run
    out = {}
    for r, start, marker_end, end, it, has_iterations in rows(con, f"""
            SELECT a.run, p.start_ns, p.marker_end_ns, p.end_ns, p.iteration,
                   EXISTS (SELECT 1 FROM iterations x WHERE x.run = a.run)
            FROM ({asked}) a LEFT JOIN ({picked}) p USING (run) ORDER BY a.run, p.start_ns""", args):
        if it is not None:
            out.setdefault(r, (r, start, marker_end, end, it))
        elif not has_iterations:
            out[r] = (r, None, None, None, None)
    return list(out.values())


def op_windows(con, its):
    """{run: (lo_ns, hi_ns, first_event_id, last_event_id)} of the iterations
    (module docstring); read with tracedb_op_windows unset."""
    out = {}
    for run, start, marker_end, _, _ in its:
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
    """(first, last) kernel id of the kernels launched (else started) in the op
    windows, over every run."""
    pairs = [rows(con, "SELECT min(kernel_id), max(kernel_id) FROM kernels "
                       "WHERE run = $run AND coalesce(launch_ts_ns, ts_ns) BETWEEN $lo AND $hi",
                  {"run": run, "lo": w[0], "hi": w[1]})[0] for run, w in found.items()]
    pairs = [p for p in pairs if p[0] is not None]
    return (min(p[0] for p in pairs), max(p[1] for p in pairs)) if pairs else (0, -1)


def _set_op_windows(con, its):
    found = op_windows(con, its)
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


def _set_segment_windows(con, its):
    found = {run: (MIN_NS, MAX_NS) if start is None else (start, end) for run, start, _, end, _ in its}
    con.execute("SET VARIABLE tracedb_segment_windows = {'start_ns': $lo, 'end_ns': $hi, 'runs': "
                "MAP(CAST($runs AS VARCHAR[]), CAST($spans AS STRUCT(start_ns BIGINT, end_ns BIGINT)[]))}",
                {"lo": min((w[0] for w in found.values()), default=0),
                 "hi": max((w[1] for w in found.values()), default=-1),
                 "runs": list(found), "spans": [{"start_ns": a, "end_ns": b} for a, b in found.values()]})


def _set_gpu_time_iterations(con, its):
    found = {run: it for run, _, _, _, it in its if it is not None}
    con.execute("SET VARIABLE tracedb_gpu_time_iterations = {'lo': $lo, 'hi': $hi, "
                "'runs': MAP(CAST($runs AS VARCHAR[]), CAST($its AS INTEGER[]))}",
                {"lo": min(found.values(), default=0), "hi": max(found.values(), default=-1),
                 "runs": list(found), "its": list(found.values())})


KINDS = {"op_windows": ("tracedb_op_windows", _set_op_windows),
          "segment_windows": ("tracedb_segment_windows", _set_segment_windows),
          "gpu_time_windows": ("tracedb_gpu_time_iterations", _set_gpu_time_iterations)}


def _reset(con):
    for variable, _ in KINDS.values():
        con.execute(f"RESET VARIABLE {variable}")


@contextlib.contextmanager
def narrowed(con, report, values):
    """The report's SQL runs with the window variables its header asks for set
    (module docstring), and unset after, whatever happens: a variable left set
    would narrow every later read of the views on the connection."""
    _reset(con)                      # none left over: the windows are read from the whole views
    try:
        for key, (_, set_variable) in KINDS.items():
            mode = getattr(report, key)
            its = iterations(con, mode, values) if mode else None
            if its is not None:
                set_variable(con, its)
        yield
    finally:
        try:
            _reset(con)
        except duckdb.TransactionException:
            # the report's error aborted the caller's explicit transaction, where
            # nothing can run; rolling it back is all that transaction allows
            con.rollback()
            _reset(con)
