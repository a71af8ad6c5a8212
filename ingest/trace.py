"""Load one Chrome-trace JSON file (PyTorch/Kineto, TensorFlow/JAX XProf) as a run."""
import functools
import hashlib
import json
import re
import warnings
from contextlib import contextmanager

import duckdb
import pyarrow as pa

from tracedb.db import run_script, scalar, sql_literal, sql_text
from tracedb.ingest import trace_json
from tracedb.ingest.errors import IngestError
from tracedb.ingest.registry import Prepared, Reader, Reload
from tracedb.ingest.source import status

# Above 2^43 µs a double's spacing exceeds 1 ns: DuckDB's JSON reader (which
# parses numbers as doubles) would lose the nanoseconds of such timestamps.
EXACT_DOUBLE_US = 2 ** 43
# DuckDB's memory limit while a trace loads: the trace's size plus 10%, at least
# 1 GiB (a 1.07 GB trace then peaks at ~1.3 GB of RSS; unlimited, at ~1.9 GB; at
# 1 GiB, 1.2 GB but 0.2 s slower).
MEMORY_CAP_MIN = 1 << 30
MEMORY_CAP_OVER_SIZE = 1.1


class CutInsideEvent(Exception):
    """DuckDB rejected a piece of a trace cut in several: load the joined pieces."""


def _read_pieces(con, files):
    """The temp views _trace_source and _trace_rows over the pieces of the event array."""
    cols = "{" + ", ".join(f"'{k}': '{v}'" for k, v in trace_json.RAW_COLUMNS.items()) + "}"
    con.execute(
        "CREATE OR REPLACE TEMP VIEW _trace_source AS SELECT * FROM read_json("
        f"{sql_literal(list(files))}, format='array', columns={cols}, "
        "maximum_object_size=16777216)")
    run_script(con, sql_text("schema", "load/trace_rows.sql"))


def _stage_fast(con, tf):
    """DuckDB's JSON reader over the pieces of the event array -> _trace_staged,
    one thread per piece (a numbering window over the scan would hold it to one
    thread: 6.5 s for 2.7 M events on two cores, against ~4 s so)."""
    con.execute("SET preserve_insertion_order = true")    # the event order is the file order
    _read_pieces(con, tf.pieces)
    try:
        con.execute("CREATE OR REPLACE TEMP TABLE _trace_staged AS SELECT * FROM _trace_rows")
    except duckdb.Error as e:    # the caller rolls back, the views with the rest
        msg = str(e).splitlines()[0]
        if len(tf.pieces) > 1 and isinstance(e, duckdb.InvalidInputException) and "JSON" in msg:
            raise CutInsideEvent() from None
        raise IngestError(tf.path, f"malformed trace JSON ({msg})" if "JSON" in msg
                          else f"database error while loading ({msg})") from None
    con.execute("DROP VIEW _trace_rows")
    con.execute("DROP VIEW _trace_source")


def _stage_exact(con, tf):
    """The exact path -> _trace_staged: Arrow batches of the event array, numbers
    kept as text (ingest/trace_json.exact_batches)."""
    con.execute("DROP TABLE IF EXISTS _trace_staged")
    for batch in trace_json.exact_batches(tf):
        con.register("_trace_source", pa.Table.from_batches([batch]))
        run_script(con, sql_text("schema", "load/trace_rows.sql"))
        if scalar(con, "SELECT count(*) FROM duckdb_tables() WHERE temporary AND table_name = '_trace_staged'"):
            con.execute("INSERT INTO _trace_staged SELECT * FROM _trace_rows")
        else:
            con.execute("CREATE TEMP TABLE _trace_staged AS SELECT * FROM _trace_rows")
        con.execute("DROP VIEW _trace_rows")
        con.unregister("_trace_source")


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


def _needs_exact(con):
    """True when a staged timestamp may have lost its nanoseconds in a double."""
    return scalar(con, "SELECT count(*) FROM _trace_staged WHERE abs(ts_ns) >= ? AND ts_ns % 1000 <> 0",
                  [EXACT_DOUBLE_US * 1000]) > 0


def load(con, tf, run):
    """Insert the split trace's events and derived tables under `run`.

    tf.iteration_marker: name of the CPU-side event (annotation or op) that marks
    iterations, for traces without ProfilerStep markers (--iterations-from).
    The caller owns the transaction and registers the run row first.
    """
    iteration_marker = getattr(tf, "iteration_marker", None)
    path = tf.path
    base_ns = tf.members.get("baseTimeNanoseconds") or 0
    if not isinstance(base_ns, int):
        raise IngestError(path, f"baseTimeNanoseconds is not an integer: {base_ns!r}")
    exact = tf.truncated
    if not exact:
        with status(f"parsing {path}"):
            _stage_fast(con, tf)
        exact = _needs_exact(con)
    if exact:
        _stage_exact(con, tf)
    if tf.truncated:
        n = scalar(con, "SELECT count(*) FROM _trace_staged")
        warnings.warn(f"{path}: event array is cut off; repaired after its last complete event ({n} events)")
    with status("linking kernels, launches, ops and iterations"):
        con.execute("SET VARIABLE tracedb_run = ?", [run])
        con.execute("SET VARIABLE tracedb_base_ns = ?", [base_ns])
        con.execute("SET VARIABLE tracedb_iteration_marker = ?", [iteration_marker])
        run_script(con, sql_text("schema", "load/trace_events.sql"))
        run_script(con, sql_text("schema", "load/derive_trace.sql"), {"run": run})
        con.execute("DROP VIEW _run_events")
        con.execute("DROP TABLE _trace_staged")
        for v in ("tracedb_run", "tracedb_base_ns", "tracedb_first_rowid", "tracedb_iteration_marker"):
            con.execute(f"RESET VARIABLE {v}")
    if iteration_marker is not None and not scalar(con, "SELECT count(*) FROM iterations WHERE run = ?", [run]):
        raise IngestError(path, f"--iterations-from {iteration_marker!r}: no CPU-side event of that name "
                                "with a duration in the trace")
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


class TraceReader(Reader):
    """Chrome-trace JSON (PyTorch/Kineto, TensorFlow/JAX trace_viewer), plain or gzip."""
    kind = "trace"

    def sniff(self, path, text):
        t = text()
        if t[:1] in "{[" and ('"traceEvents"' in t or re.match(r"\[\s*(\{|\])", t)):
            return "chrome-json"
        return None

    def prepare(self, con, path, fmt, work, options):
        hasher = hashlib.sha256()
        tf = trace_json.split(path, work, hasher)
        # A duplicate has the same size: only then wait for the hash before loading;
        # otherwise hashing an uncompressed file overlaps the parse.
        if scalar(con, "SELECT count(*) FROM runs WHERE content_bytes = ?", [tf.content_bytes]):
            tf.wait_hash()
        tf.iteration_marker = options.get("iterations_from")
        return Prepared(fmt, tf.content_bytes, lambda: (tf.wait_hash(), hasher.hexdigest())[1],
                        digest_ready=tf.hashing is None, state=tf)

    def loading(self, con, prep):
        return memory_cap(con, prep.content_bytes)

    def load(self, con, prep, run):
        tf = prep.state
        try:
            info = load(con, tf, run) or {}
        except CutInsideEvent:      # a cut between pieces fell inside an event: rare
            raise Reload() from None
        fields = run_metadata(con, run, tf.members)
        fields.update(info)
        fields["n_events"] = scalar(con, "SELECT count(*) FROM events WHERE run = ?", [run])
        return fields

    def reload(self, prep, work):
        trace_json.join_pieces(prep.state, work)
