"""Pair ncu kernels with the trace kernels they measured, in SQL.

schema/match/prepare.sql builds the candidate pairs with their scores;
schema/match/round.sql assigns mutual best pairs and is repeated until no
pair is left to assign (a handful of rounds); schema/match/finish.sql stores
them in `matches` and a summary in `match_runs`.
"""
import time
import warnings

from ..store.db import sql_text
from ..store.sql import rows, run_script, scalar
from ..errors import TracedbError

MAX_ROUNDS = 20
WINDOW = 16
# A pairing whose matched kernels disagree in name (name_score < 1: not the same
# normalized name) more often than this is refused: the report profiled another
# workload (issue 50: a GPT-2 report with a ResNet-50 trace matched 328 kernels, 262
# of them under other names). Right pairings of the fixtures: at most 0.8%.
MAX_NAME_MISMATCH_PCT = 20.0


class MatchError(TracedbError):
    pass


def _kind(con, run):
    return scalar(con, "SELECT kind FROM runs WHERE run = ?", [run])


def nvtx_step(con, ncu_run):
    """The training step that ncu's NVTX ranges name for every kernel of ncu_run, or
    None. A raw CSV exported with `--nvtx` has a column for each kind of range: the
    push/pop ranges (torch.cuda.nvtx.range_push, ProfilerStep#N under emit_nvtx) and
    the start/end ranges (`tracedb capture --ncu` limits ncu to tracedb_step_N, N
    being the ProfilerStep number); a .ncu-rep gives the same two columns
    (ingest/ncu_rep_dump.py). ncu's values go to counters as text. One N named
    by every kernel is the step profiled; ranges that name none, or several, say
    nothing."""
    found = rows(con, sql_text("schema", "match/nvtx_step.sql"), {"ncu_run": ncu_run})
    return found[0][0] if found else None


def numbers_profiler_steps(con, trace_run, step):
    """Whether trace_run names its iteration `step` ProfilerStep#step, so that its
    iteration numbers are the step numbers NVTX ranges carry (iterations counted by
    --iterations-from start at 0 and say nothing of step N)."""
    return scalar(con, "SELECT count(*) FROM iterations WHERE run = ? AND iteration = ? AND name = ?",
                  [trace_run, step, f"ProfilerStep#{step}"]) > 0


def match(con, trace_run, ncu_run, iteration=None, whole_run=False, window=WINDOW, force=False):
    """Match and store in one transaction; returns the match_runs row as a dict."""
    con.begin()
    try:
        row = match_in_transaction(con, trace_run, ncu_run, iteration, whole_run, window, force)
        con.commit()
    except BaseException:
        con.rollback()
        raise
    return row


def match_in_transaction(con, trace_run, ncu_run, iteration=None, whole_run=False, window=WINDOW, force=False):
    """Match and store inside the caller's transaction (ingest --pair-with pairs in
    the ingest's own); returns the match_runs row as a dict."""
    if _kind(con, trace_run) != "trace":
        raise MatchError(f"{trace_run!r} is not a trace run in this database")
    if _kind(con, ncu_run) != "ncu":
        raise MatchError(f"{ncu_run!r} is not an ncu run in this database")
    if iteration is not None and not scalar(
            con, "SELECT count(*) FROM iterations WHERE run = ? AND iteration = ?", [trace_run, iteration]):
        raise MatchError(f"{trace_run!r} has no iteration {iteration}")
    step = None if whole_run else nvtx_step(con, ncu_run)
    if step is not None and iteration is None:
        # the step ncu profiled, not the steady one (identical steps match alike)
        if numbers_profiler_steps(con, trace_run, step):
            iteration = step
        else:
            warnings.warn(f"{ncu_run}: ncu's NVTX ranges name step {step}, which {trace_run} does not number "
                          f"as ProfilerStep#{step}; matched with its steady iteration (--iteration N picks one)")
    elif step is not None and iteration is not None and step != iteration:
        warnings.warn(f"{ncu_run}: ncu's NVTX ranges name step {step}, but iteration {iteration} "
                      f"of {trace_run} was asked for; matched with iteration {iteration}")
    params = {"trace_run": trace_run, "ncu_run": ncu_run, "iteration": iteration,
              "whole_run": bool(whole_run), "window": int(window)}
    t0 = time.perf_counter()
    run_script(con, sql_text("schema", "match/prepare.sql"), params)
    round_sql = sql_text("schema", "match/round.sql")
    for r in range(1, MAX_ROUNDS + 1):
        before = scalar(con, "SELECT count(*) FROM _m_pairs")
        run_script(con, round_sql, {"round": r})
        if scalar(con, "SELECT count(*) FROM _m_pairs") == before:
            break
    params["seconds"] = time.perf_counter() - t0
    run_script(con, sql_text("schema", "match/finish.sql"), params)
    cols = ["trace_run", "ncu_run", "iteration", "trace_kernels", "ncu_kernels", "matched",
            "candidates", "seconds"]
    row = con.execute(f"SELECT {', '.join(cols)} FROM match_runs WHERE trace_run = ? AND ncu_run = ?",
                      [trace_run, ncu_run]).fetchall()[0]
    out = dict(zip(cols, row), nvtx_step=step)
    out["name_mismatches"], out["name_mismatch_pct"] = name_mismatch(con, trace_run, ncu_run)
    if out["name_mismatch_pct"] > MAX_NAME_MISMATCH_PCT:
        if not force:
            raise MatchError(
                f"refused: {out['name_mismatches']} of the {out['matched']} kernels matched "
                f"({out['name_mismatch_pct']:.1f}%) have another name in {trace_run} than in {ncu_run}, more than "
                f"{MAX_NAME_MISMATCH_PCT:g}%: the report does not look like a profile of this trace's workload "
                f"(--force keeps the pairing, flagged)")
        out["forced"] = True
        warnings.warn(f"{ncu_run}: pairing with {trace_run} kept by --force although "
                      f"{out['name_mismatch_pct']:.1f}% of the matched kernels disagree in name")
    return out


def name_mismatch(con, trace_run, ncu_run):
    """(pairs, % of the matched pairs) whose kernel names disagree (name_score < 1)."""
    n, bad = con.execute("SELECT count(*), count(*) FILTER (name_score < 1) FROM matches "
                         "WHERE trace_run = ? AND ncu_run = ?", [trace_run, ncu_run]).fetchone()
    return bad, (100.0 * bad / n if n else 0.0)
