"""Load one Chrome-trace JSON file (PyTorch/Kineto, TensorFlow/JAX XProf) as a run."""
import json
import warnings

import duckdb
import pyarrow as pa

from tracedb.db import run_script, scalar, sql_text
from tracedb.ingest import trace_json
from tracedb.ingest.errors import IngestError
from tracedb.ingest.source import status

# Above 2^43 µs a double's spacing exceeds 1 ns: DuckDB's JSON reader (which
# parses numbers as doubles) would lose the nanoseconds of such timestamps.
EXACT_DOUBLE_US = 2 ** 43


def _quote(path):
    return "'" + str(path).replace("'", "''") + "'"


def _load_fast(con, tf, params):
    cols = "{" + ", ".join(f"'{k}': '{v}'" for k, v in trace_json.RAW_COLUMNS.items()) + "}"
    con.execute(
        "CREATE OR REPLACE TEMP VIEW _trace_source AS "
        "SELECT row_number() OVER () - 1 AS event_id, * FROM read_json("
        f"{_quote(tf.events_path)}, format='array', columns={cols}, "
        "maximum_object_size=268435456)")
    try:
        run_script(con, sql_text("schema", "load_events.sql"), params)
    except duckdb.Error as e:    # the caller rolls back, the view with the rest
        raise IngestError(tf.path, f"malformed trace JSON ({str(e).splitlines()[0]})") from None
    con.execute("DROP VIEW _trace_source")


def _needs_exact(con, run, base_ns):
    """True when a timestamp may have lost its nanoseconds in a double."""
    return scalar(con,
        "SELECT count(*) FROM events WHERE run = ? AND abs(ts_ns - ?) >= ? AND ts_ns % 1000 <> 0",
        [run, base_ns, EXACT_DOUBLE_US * 1000]) > 0


def _load_exact(con, tf, params):
    n = 0
    sql = sql_text("schema", "load_events.sql")
    for batch in trace_json.exact_batches(tf):
        table = pa.Table.from_batches([batch])
        table = table.add_column(0, "event_id", pa.array(range(n, n + len(table)), pa.int64()))
        con.register("_trace_source", table)
        run_script(con, sql, params)
        con.unregister("_trace_source")
        n += len(table)
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
    exact = tf.truncated
    if not exact:
        with status(f"parsing {path}"):
            _load_fast(con, tf, params)
        if _needs_exact(con, run, base_ns):
            con.execute("DELETE FROM events WHERE run = ?", [run])
            exact = True
    if exact:
        _load_exact(con, tf, params)
    if tf.truncated:
        n = scalar(con, "SELECT count(*) FROM events WHERE run = ?", [run])
        warnings.warn(f"{path}: event array is cut off; repaired after its last complete event ({n} events)")
    with status("linking kernels, launches, ops and iterations"):
        run_script(con, sql_text("schema", "derive_trace.sql"), {"run": run})
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
