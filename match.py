"""Pair ncu kernels with the trace kernels they measured, in SQL.

schema/match/prepare.sql builds the candidate pairs with their scores;
schema/match/round.sql assigns mutual best pairs and is repeated until no
pair is left to assign (a handful of rounds); schema/match/finish.sql stores
them in `matches` and a summary in `match_runs`.
"""
import time

from tracedb.db import run_script, scalar, sql_text

MAX_ROUNDS = 20
WINDOW = 16


class MatchError(Exception):
    pass


def _kind(con, run):
    return scalar(con, "SELECT kind FROM runs WHERE run = ?", [run])


def match(con, trace_run, ncu_run, iteration=None, whole_run=False, window=WINDOW):
    """Match and store in one transaction; returns the match_runs row as a dict."""
    con.begin()
    try:
        row = match_in_transaction(con, trace_run, ncu_run, iteration, whole_run, window)
        con.commit()
    except BaseException:
        con.rollback()
        raise
    return row


def match_in_transaction(con, trace_run, ncu_run, iteration=None, whole_run=False, window=WINDOW):
    """Match and store inside the caller's transaction (ingest --pair-with pairs in
    the ingest's own); returns the match_runs row as a dict."""
    if _kind(con, trace_run) != "trace":
        raise MatchError(f"{trace_run!r} is not a trace run in this database")
    if _kind(con, ncu_run) != "ncu":
        raise MatchError(f"{ncu_run!r} is not an ncu run in this database")
    if iteration is not None and not scalar(
            con, "SELECT 1 FROM iterations WHERE run = ? AND iteration = ?", [trace_run, iteration]):
        raise MatchError(f"{trace_run!r} has no iteration {iteration}")
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
    return dict(zip(cols, row))
