"""Pairing without --pair-with: an ncu report or a power log given to `tracedb ingest`
pairs with the trace that can only be its own, and the command says which and why.

Before the load (so the pairing is in the ingest's transaction): the one trace of the
command, or, when the command holds no trace, the one trace run of the database.
After the load, when several traces could own it: the traces (of the command, else of
the database) on the same device (ncu) or whose absolute time overlaps the log's
(power); exactly one left pairs in a second transaction, otherwise the file stays
unpaired and the line says which runs could own it.
"""
from tracedb.db import rows
from tracedb.ingest import IngestError, transaction
from tracedb.ingest.registry import detect
from tracedb.match import MatchError


def pairs(path):
    """The kind of the file's run when it pairs with a trace (ncu, power), else None."""
    try:
        reader, _ = detect(path)
    except IngestError:
        return None
    return reader.kind if reader.pairs else None


def before(con, command_traces):
    """(trace run, why) when the choice is clear before the load, else (None, None)."""
    if len(command_traces) == 1:
        return command_traces[0], "the trace of this command"
    if not command_traces:
        traces = [r[0] for r in rows(con, "SELECT run FROM runs WHERE kind = 'trace'")]
        if len(traces) == 1:
            return traces[0], "the only trace in the database"
    return None, None


def candidates(con, run, kind, command_traces):
    """Trace runs that could own the ncu/power run `run`: same device (ncu) or an
    absolute time range that overlaps the log's (power)."""
    pool = command_traces or [r[0] for r in rows(con, "SELECT run FROM runs WHERE kind = 'trace'")]
    if not pool:
        return [], "no trace run"
    if kind == "ncu":
        found = rows(con, """SELECT t.run FROM runs t, runs n
                             WHERE n.run = $run AND t.run IN (SELECT unnest($pool))
                               AND t.device_name IS NOT NULL AND t.device_name = n.device_name
                             ORDER BY t.run""", {"run": run, "pool": pool})
        return [r[0] for r in found], "same device"
    found = rows(con, """WITH p AS (SELECT min(ts_ns) AS s, max(ts_ns) AS e FROM power WHERE run = $run),
                              t AS (SELECT e.run, min(e.ts_ns) AS s, max(e.ts_ns + coalesce(e.dur_ns, 0)) AS e
                                    FROM events e JOIN runs r USING (run)
                                    WHERE e.run IN (SELECT unnest($pool)) AND r.base_time_ns > 0
                                    GROUP BY e.run)
                         SELECT t.run FROM t, p WHERE t.s <= p.e AND p.s <= t.e ORDER BY t.run""",
                 {"run": run, "pool": pool})
    return [r[0] for r in found], "overlapping absolute time"


def after(con, reader_path, run, kind, command_traces, options):
    """Pair the loaded, unpaired run when exactly one trace can own it; returns
    (pairing or None, sentence for the user)."""
    found, why = candidates(con, run, kind, command_traces)
    if len(found) != 1:
        pool = command_traces or [r[0] for r in rows(con, "SELECT run FROM runs WHERE kind = 'trace'")]
        if not pool:
            return None, f"not paired: {run} has no trace run to pair with (ingest one, then tracedb match / --pair-with)"
        could = found or pool
        return None, (f"not paired: {len(could)} trace runs could own {run} ({', '.join(could[:5])}"
                      f"{', ...' if len(could) > 5 else ''}): give --pair-with RUN")
    reader, _ = detect(reader_path)
    try:
        with transaction(con, reader_path):
            pairing = reader.pair(con, run, found[0], options)
            con.execute("UPDATE runs SET paired_run = ? WHERE run = ?", [found[0], run])
    except MatchError as e:
        raise IngestError(reader_path, f"pairing with {found[0]}: {e}") from None
    return pairing, f"paired {run} with trace {found[0]} ({why})"


def others(con, run, kind, trace):
    """A note when the trace now has several runs of this kind paired: which one the reports use."""
    if kind == "ncu":
        got = rows(con, "SELECT ncu_run FROM match_runs WHERE trace_run = ? ORDER BY matched_at, ncu_run", [trace])
        used = rows(con, "SELECT ncu_run FROM trace_ncu_pairs WHERE run = ?", [trace])
        if len(got) > 1:
            return (f"note: trace {trace} has {len(got)} ncu runs paired ({', '.join(r[0] for r in got)}); "
                    f"the utilization reports use {used[0][0] if used else '?'}, the last matched")
        return None
    got = rows(con, "SELECT power_run FROM power_alignment WHERE trace_run = ? ORDER BY power_run", [trace])
    if len(got) > 1:
        return (f"note: trace {trace} has {len(got)} power logs paired ({', '.join(r[0] for r in got)}); "
                f"the energy reports give a row per power log (--param power_run=RUN picks one)")
    return None
