"""Pairing without --pair-with: an ncu report, a power log or a host log given to
`tracedb ingest` pairs with the trace that can only be its own, and the command
says which and why.

Before the load (so the pairing is in the ingest's transaction): the one trace of the
command, or, when the command holds no trace, the one trace run of the database.
After the load, when several traces could own it: the traces (of the command, else of
the database) that its reader names as candidates (ncu: the same device; power and
host logs: an absolute time that overlaps the log's); exactly one left pairs in a
second transaction, otherwise the file stays unpaired and the line says which runs
could own it. Undoing a pairing (`tracedb rm --pairing`) is the reader's too.
"""
from ..errors import TracedbError
from ..suggest import run_hint
from ..store.sql import rows, scalar
from .errors import IngestError
from .match import MatchError
from .registry import detect, reader_of_kind


def pairs(path):
    """The kind of the file's run when it pairs with a trace (ncu, power, host), else None."""
    try:
        reader, _ = detect(path)
    except IngestError:
        return None
    return reader.kind if reader.pairs else None


def _traces(con):
    return [r[0] for r in rows(con, "SELECT run FROM runs WHERE kind = 'trace' ORDER BY run")]


def before(con, command_traces):
    """(trace run, why) when the choice is clear before the load, else (None, None)."""
    if len(command_traces) == 1:
        return command_traces[0], "the trace of this command"
    if not command_traces:
        traces = _traces(con)
        if len(traces) == 1:
            return traces[0], "the only trace in the database"
    return None, None


def candidates(con, run, kind, command_traces):
    """Trace runs that could own the run `run` of kind `kind`, and why (its reader says)."""
    pool = command_traces or _traces(con)
    if not pool:
        return [], "no trace run"
    return reader_of_kind(kind).candidates(con, run, pool)


def after(con, reader_path, run, kind, command_traces, options):
    """Pair the loaded, unpaired run when exactly one trace can own it; returns
    (pairing or None, sentence for the user)."""
    from . import transaction
    found, why = candidates(con, run, kind, command_traces)
    if len(found) != 1:
        pool = command_traces or _traces(con)
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
    return reader_of_kind(kind).paired_note(con, trace)


class PairingError(TracedbError):
    """A pairing that cannot be undone: no such run, or a run of a kind that never pairs."""


def unpair(con, run, trace=None):
    """Undo the pairing of run (an ncu report, a power or host log) with its trace (the
    one named: a report matched with two traces needs it); the run stays. One
    transaction; returns {table: rows deleted}."""
    kind = scalar(con, "SELECT kind FROM runs WHERE run = ?", [run])
    if kind is None:
        raise PairingError(f"no run named {run!r} in the database{run_hint(con, run)}")
    reader = reader_of_kind(kind)
    if not reader.pairs:
        paired = ", ".join(r.kind for r in _pairing_readers())
        raise PairingError(f"run {run!r} is a {kind} run: only {paired} runs are paired")
    paired = reader.paired_traces(con, run)
    if trace is not None and trace not in paired:
        raise PairingError(f"run {run!r} is not paired with {trace!r} (paired with: {', '.join(paired) or 'none'})")
    if trace is None and len(paired) > 1:
        raise PairingError(f"run {run!r} is paired with {len(paired)} traces ({', '.join(paired)}): "
                           f"name the one to unpair with --trace")
    con.begin()
    try:
        deleted = reader.unpair(con, run, trace)
        con.commit()
    except BaseException:
        con.rollback()
        raise
    return deleted


def _pairing_readers():
    from .registry import readers
    seen = {}
    for r in readers():
        if r.pairs:
            seen.setdefault(r.kind, r)
    return list(seen.values())
