"""`tracedb export --perfetto`: one trace run as Chrome trace JSON, for the Perfetto
UI and chrome://tracing, with what tracedb knows added (schema/export/perfetto.sql
says what). The events are written as JSON text by DuckDB and streamed to the file
in batches; the run's top-level members (deviceProperties, baseTimeNanoseconds,
distributedInfo ...) are written back, so tracedb re-ingests its own export into a
run with the same events, kernels and iterations (plus tracedb's own tracks).
"""
import gzip
import json
import sys
import time

from ..store.db import sql_text
from ..store.sql import bind, read_batches, rows, scalar, statements
from ..store.tuning import memory_cap
from ..errors import TracedbError

TRACEDB_PID = 2_000_000_000     # process id of tracedb's own tracks (iterations, power, memory)
# The run's events are sorted and written this many event ids at a time: one sort of
# all of them (a 10 GB trace's 25.5 M lines) held 9.8 GB.
WINDOW_EVENTS = 1 << 20
# The critical path track holds every iteration's path up to this many iterations, else
# the steady iteration's.
PATH_ITERATIONS = 20


class ExportError(TracedbError, ValueError):
    pass


def _finding_events(con, run, base_ns):
    """The findings of tracedb advise on each iteration, as instant events at the
    iteration's start on tracedb's track 'findings' (what is wrong, the numbers,
    what to try)."""
    from ..analysis import advise
    starts = dict(rows(con, "SELECT iteration, start_ns FROM iterations WHERE run = ?", [run]))
    out = []
    for f in advise.evaluate_many(con, run, "all") if starts else []:
        if f["severity"] in ("ok", "skipped") or f["iteration"] not in starts:
            continue
        out.append(json.dumps({
            "ph": "i", "s": "p", "cat": "tracedb", "name": f"{f['rule']} ({f['severity']})",
            "pid": TRACEDB_PID, "tid": 2, "ts": round((starts[f["iteration"]] - base_ns) / 1000, 3),
            "args": {"iteration": f["iteration"], "evidence": f["evidence"], "suggestion": f["suggestion"],
                     "next_report": f.get("next_report")}}))
    return out


def _critical_path_events(con, run, base_ns):
    """The critical path of each iteration (analysis/critpath.py), as slices on
    tracedb's track 'critical path': one per segment, named by its category and what
    ran, so the timeline shows what bounded each step."""
    from ..analysis import critpath
    n = scalar(con, "SELECT count(*) FROM iterations WHERE run = ?", [run])
    if not n:
        return []
    # every iteration's path where they are few; else the steady one's (a path costs
    # about 0.7 s an iteration of a large trace)
    which = "all" if n <= PATH_ITERATIONS else None
    out = []
    for r in critpath.path_table(con, {"run": run, "iteration": which}).to_pylist():
        if r["dur_ns"] <= 0:
            continue
        args = {k: r[k] for k in ("iteration", "seq", "what", "category", "layer_type", "place", "edge",
                                  "node_id", "missing_edge") if r[k] is not None}
        out.append(json.dumps({"ph": "X", "cat": "tracedb", "name": f"{r['category']}: {r['what']}",
                               "pid": TRACEDB_PID, "tid": 4})[:-1]
                   + f', "ts": {_us(r["start_ns"] - base_ns)}, "dur": {_us(r["dur_ns"])}, "args": {json.dumps(args)}}}')
    return out


def _us(ns):
    """µs text of an integer ns offset, exact (three decimals), as the export writes every ts."""
    return f"{'-' if ns < 0 else ''}{abs(ns) // 1000}.{abs(ns) % 1000:03d}"


def _append(f, lines, n):
    """Append lines (JSON objects) to the event array, n written before; the new n."""
    if lines:
        f.write((",\n" if n else "") + ",\n".join(lines))
    return n + len(lines)


def _write(f, relation, n):
    """Append the relation's lines to the event array (n written before); the new n."""
    for batch in read_batches(relation.to_arrow_reader(50_000)):     # DuckDB's errors as its own, not OSError
        n = _append(f, batch.column("line").to_pylist(), n)
    return n


def export(con, run, path, progress=False):
    """Write trace run `run` to `path` (.json, or .json.gz compressed); returns the
    number of events written."""
    kind = scalar(con, "SELECT kind FROM runs WHERE run = ?", [run])
    if kind is None:
        raise ExportError(f"export --perfetto: no run named {run!r} in the database")
    if kind != "trace":
        raise ExportError(f"export --perfetto: run {run!r} is of kind {kind}; export the trace run it is paired with")
    meta = json.loads(scalar(con, "SELECT metadata FROM runs WHERE run = ?", [run]) or "{}")
    meta.pop("source_format", None)
    base = scalar(con, "SELECT coalesce(base_time_ns, 0) FROM runs WHERE run = ?", [run]) or 0
    params = {"run": run, "base_ns": base, "pid": str(TRACEDB_PID)}
    *macros, own, added = statements(sql_text("schema", "export/perfetto.sql"))
    for m in macros:
        con.execute(m)
    ((total, first, last),) = rows(con, "SELECT count(*), min(event_id), max(event_id) FROM events WHERE run = ?",
                                   [run])
    opener = gzip.open if str(path).lower().endswith(".gz") else open
    t0, n = time.monotonic(), 0
    try:
        with memory_cap(con), opener(path, "wt", encoding="utf-8") as f:
            head = {k: v for k, v in meta.items() if k != "traceEvents"}
            head.setdefault("displayTimeUnit", "ns")
            f.write(json.dumps(head)[:-1] + (", " if head else "") + '"traceEvents": [\n')
            windows = range(first, last + 1, WINDOW_EVENTS) if total else ()
            for lo in windows:
                n = _write(f, con.sql(own, params=bind(own, params | {"lo": lo, "hi": lo + WINDOW_EVENTS})), n)
                if progress:
                    print(f"\rexporting {run}: {min(n, total)}/{total} events", end="", file=sys.stderr, flush=True)
            n = _write(f, con.sql(added, params=bind(added, params)), n)
            n = _append(f, _finding_events(con, run, base), n)
            n = _append(f, _critical_path_events(con, run, base), n)
            f.write("\n]}\n")
    except OSError as e:
        raise ExportError(f"{path}: cannot write ({e.strerror})") from None
    if progress:
        print(f"\rexported {run}: {n} events in {time.monotonic() - t0:.1f} s", file=sys.stderr)
    return n
