"""Load one Chrome-trace JSON file (PyTorch/Kineto, TensorFlow/JAX XProf) as a run."""
import functools
import json
import re
import warnings
from contextlib import contextmanager

import duckdb
import pyarrow as pa

from tracedb.db import run_script, scalar, sql_text
from tracedb.ingest import trace_json
from tracedb.ingest.errors import IngestError
from tracedb.ingest.source import status

# Above 2^43 µs a double's spacing exceeds 1 ns: DuckDB's JSON reader (which
# parses numbers as doubles) would lose the nanoseconds of such timestamps.
EXACT_DOUBLE_US = 2 ** 43
# DuckDB's memory limit while a trace loads: the trace's size plus 10%, at least
# 1 GiB (a 1.07 GB trace then peaks at ~1.3 GB of RSS; unlimited, at ~1.9 GB; at
# 1 GiB, 1.2 GB but 0.2 s slower).
MEMORY_CAP_MIN = 1 << 30
MEMORY_CAP_OVER_SIZE = 1.1


def _quote(text):
    """A SQL string literal (views take no parameters)."""
    return "'" + str(text).replace("'", "''") + "'"


class CutInsideEvent(Exception):
    """DuckDB rejected a piece of a trace cut in several: load the joined pieces."""


def _read_pieces(con, files):
    """The temp views _trace_source and _trace_rows over the pieces of the event array."""
    cols = "{" + ", ".join(f"'{k}': '{v}'" for k, v in trace_json.RAW_COLUMNS.items()) + "}"
    con.execute(
        "CREATE OR REPLACE TEMP VIEW _trace_source AS SELECT * FROM read_json("
        f"[{', '.join(_quote(p) for p in files)}], format='array', columns={cols}, "
        "maximum_object_size=16777216)")
    run_script(con, sql_text("schema", "trace_rows.sql"))


def _load_fast(con, tf, params):
    """DuckDB's JSON reader over the pieces of the event array: one piece streams
    into events on one thread (load_events.sql); several are parsed one thread per
    piece into a temp table, then inserted in parallel (load_event_pieces.sql)."""
    con.execute("SET preserve_insertion_order = true")    # the event order is the file order
    _read_pieces(con, tf.pieces)
    one = len(tf.pieces) == 1
    sql = sql_text("schema", "load_events.sql" if one else "load_event_pieces.sql")
    try:
        run_script(con, sql, {**params, "first_event_id": 0})
    except duckdb.Error as e:    # the caller rolls back, the views with the rest
        msg = str(e).splitlines()[0]
        if not one and isinstance(e, duckdb.InvalidInputException) and "JSON" in msg:
            raise CutInsideEvent() from None
        raise IngestError(tf.path, f"malformed trace JSON ({msg})" if "JSON" in msg
                          else f"database error while loading ({msg})") from None
    con.execute("DROP VIEW _trace_rows")
    con.execute("DROP VIEW _trace_source")
    return not one


def _run_events_view(con, run, base_ns, staged):
    """The temp view derive_trace.sql reads the run's events from: the events
    table, or the uncompressed temp table a trace read in pieces was inserted from."""
    lit = _quote(run)
    if staged:      # the numbering of load_event_pieces.sql, its first rowid looked up once
        first = int(scalar(con, "SELECT min(rowid) FROM _trace_staged"))
        sel = (f"SELECT {lit} AS run, rowid - {first} AS event_id, "
               f"* REPLACE (ts_ns + {int(base_ns)} AS ts_ns) FROM _trace_staged")
    else:
        sel = f"SELECT * FROM events WHERE run = {lit}"
    con.execute(f"CREATE OR REPLACE TEMP VIEW _run_events AS {sel}")


_UNITS = {"B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
          "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


@functools.cache
def _default_memory_limit():
    return duckdb.connect().execute("SELECT current_setting('memory_limit')").fetchone()[0]


@contextmanager
def memory_cap(con, content_bytes):
    """DuckDB's memory limit lowered to about the trace's size while it loads: the
    temp table of a trace read in pieces then spills to disk instead of growing
    with the trace, and peak memory stays near the file's size. A limit the user
    set is left alone; the default comes back exactly (RESET). Wraps the
    transaction (no SET in an aborted one)."""
    old = scalar(con, "SELECT current_setting('memory_limit')")
    m = re.fullmatch(r"([0-9.]+)\s*([KMGT]?i?B)", old or "")
    cap = max(MEMORY_CAP_MIN, MEMORY_CAP_OVER_SIZE * content_bytes)
    lower = old == _default_memory_limit() and m is not None and float(m[1]) * _UNITS[m[2]] > cap
    if lower:
        con.execute(f"SET memory_limit = '{int(cap)}B'")
    try:
        yield
    finally:
        if lower:
            con.execute("RESET memory_limit")


def _needs_exact(con, run, base_ns):
    """True when a timestamp may have lost its nanoseconds in a double."""
    return scalar(con,
        "SELECT count(*) FROM events WHERE run = ? AND abs(ts_ns - ?) >= ? AND ts_ns % 1000 <> 0",
        [run, base_ns, EXACT_DOUBLE_US * 1000]) > 0


def _load_exact(con, tf, params):
    n = 0
    sql = sql_text("schema", "load_events.sql")
    for batch in trace_json.exact_batches(tf):
        con.register("_trace_source", pa.Table.from_batches([batch]))
        run_script(con, sql_text("schema", "trace_rows.sql"))
        run_script(con, sql, {**params, "first_event_id": n})
        con.execute("DROP VIEW _trace_rows")
        con.unregister("_trace_source")
        n += batch.num_rows
    return n


def load(con, tf, run):
    """Insert the split trace's events and derived tables under `run`.

    The caller owns the transaction and registers the run row first.
    """
    path = tf.path
    base_ns = tf.members.get("baseTimeNanoseconds") or 0
    if not isinstance(base_ns, int):
        raise IngestError(path, f"baseTimeNanoseconds is not an integer: {base_ns!r}")
    params = {"run": run, "base_ns": base_ns}
    exact, staged = tf.truncated, False
    if not exact:
        with status(f"parsing {path}"):
            staged = _load_fast(con, tf, params)
        if _needs_exact(con, run, base_ns):
            con.execute("DELETE FROM events WHERE run = ?", [run])
            exact, staged = True, False
    if exact:
        _load_exact(con, tf, params)
    if tf.truncated:
        n = scalar(con, "SELECT count(*) FROM events WHERE run = ?", [run])
        warnings.warn(f"{path}: event array is cut off; repaired after its last complete event ({n} events)")
    with status("linking kernels, launches, ops and iterations"):
        _run_events_view(con, run, base_ns, staged)
        run_script(con, sql_text("schema", "derive_trace.sql"), {"run": run})
        con.execute("DROP VIEW _run_events")
        con.execute("DROP TABLE IF EXISTS _trace_staged")
    return {"base_time_ns": base_ns}


def run_metadata(con, run, members):
    """Framework, device and distributed fields of the runs row, from members and events."""
    devs = members.get("deviceProperties") or []
    dist = members.get("distributedInfo") or {}
    framework = scalar(con, """
        WITH c AS (SELECT DISTINCT lower(cat) AS cat FROM events WHERE run = $run),
             n AS (SELECT DISTINCT name FROM events WHERE run = $run AND cat IS NULL)
        SELECT CASE
            WHEN EXISTS (SELECT 1 FROM c WHERE cat IN ('cpu_op', 'operator', 'cuda_runtime', 'runtime',
                                                      'python_function', 'user_annotation')) THEN 'pytorch'
            WHEN EXISTS (SELECT 1 FROM n WHERE name LIKE 'PjitFunction%' OR name LIKE 'jit_%') THEN 'jax'
            WHEN EXISTS (SELECT 1 FROM n WHERE name IN ('EagerExecute', 'EagerKernelExecute',
                                                        'TFE_Py_FastPathExecute_C')) THEN 'tensorflow'
            ELSE 'unknown' END""", {"run": run})
    device = devs[0].get("name") if devs and isinstance(devs[0], dict) else None
    if device is None:
        device = scalar(con, "SELECT min(process_name) FROM threads WHERE run = ? AND process_name LIKE '/device:%'",
                        [run])
    return {
        "framework": framework,
        "device_name": device,
        "device_properties": json.dumps(devs) if devs else None,
        "rank": dist.get("rank") if isinstance(dist, dict) else None,
        "world_size": dist.get("world_size") if isinstance(dist, dict) else None,
        "distributed_info": json.dumps(dist) if dist else None,
        "metadata": json.dumps(members, default=str),
    }
