"""The sampled GPU metrics of an Nsight Systems export (`nsys profile
--gpu-metrics-devices=...`), loaded into gpu_metric_samples beside the trace run.

nsys writes them as two tables (NVIDIA's SQLite export schema reference): the
samples, GPU_METRICS (typeId, timestamp, metricId, value), and their names,
TARGET_INFO_GPU_METRICS (typeId, sourceId, typeName, metricId, metricName:
`SMs Active [Throughput %]`, `SM Issue [Throughput %]`, `Tensor Active [Throughput %]`,
`DRAM Read Bandwidth [Throughput %]` ...). Both are found as the reader finds its
other tables: by name (the latest `_Vn`), else by the columns they hold; the
columns by the names they have had. No public export holding them could be read
to verify this against (tests/data/nsys/README.md): the schema is NVIDIA's
documented one.
"""
import io
import re
import sqlite3

import pyarrow as pa
import pyarrow.csv as pcsv

from .errors import IngestError
from ..store.catalog import sql_text
from ..store.sql import run_script_over, scalar
from . import nsys_csv

# kind -> (name pattern, columns the kind's table holds (lower case), {alias: names it has had})
TABLES = {
    "samples": (r"GPU_METRICS(_V\d+)?", {"typeid", "metricid", "value"},
                {"type_id": "typeId", "ts": "timestamp|start", "metric_id": "metricId", "value": "value"}),
    "names": (r"TARGET_INFO_GPU_METRICS(_V\d+)?", {"typeid", "metricid", "metricname"},
              {"type_id": "typeId", "metric_id": "metricId", "metric_name": "metricName|name"}),
}
BATCH_ROWS = 1 << 18


def table_of(ex, kind):
    """The export's table of a kind (samples or names): by name (the latest _Vn), else
    by its columns; or None. A samples' table found by its columns alone must have
    METRIC in its name, or metric ids all of which the names' table describes (so
    that an unrelated table of an id, a time and a value is not read as samples)."""
    pattern, need, _ = TABLES[kind]
    named = ex.tables_like(pattern)
    if named:
        return named[0]
    for t in sorted(ex.tables):
        if t.startswith(("sqlite_", "ENUM_")):
            continue
        cols = {c.lower() for c in ex.cols(t)}
        # (the samples' table holds no metric name; the names' table no value)
        if need <= cols and not (kind == "samples" and "metricname" in cols) \
                and not (kind == "names" and "value" in cols):
            if kind == "names" or "METRIC" in t.upper() or _described(ex, t):
                return t
    return None


def _described(ex, table):
    """Whether the names' table describes every metric id of table (and it has some)."""
    names = table_of(ex, "names")
    if names is None:
        return False
    q = ex.qid
    mid = next(c for c in ex.cols(table) if c.lower() == "metricid")
    nid = next(c for c in ex.cols(names) if c.lower() == "metricid")
    have, missing = ex.con.execute(
        f"SELECT count(*), count(*) FILTER (WHERE m NOT IN (SELECT {q(nid)} FROM {q(names)} "
        f"WHERE {q(nid)} IS NOT NULL)) FROM (SELECT DISTINCT {q(mid)} AS m FROM {q(table)})").fetchone()
    return have > 0 and missing == 0


def _select(ex, table, kind):
    """SELECT of a table's columns under the load's names (NULL where it has none), or None
    when a column the load cannot go without (a time, a metric id, a value) is missing."""
    have = {c.lower(): c for c in ex.cols(table)}
    parts = []
    for alias, names in TABLES[kind][2].items():
        found = next((have[n.lower()] for n in names.split("|") if n.lower() in have), None)
        if found is None and alias in ("ts", "metric_id", "value"):
            return None
        parts.append(f"{ex.qid(found)} AS {alias}" if found else f"NULL AS {alias}")
    return f'SELECT {", ".join(parts)} FROM {ex.qid(table)}'


def unit(name):
    """The unit of a metric's name, its bracketed end: `[Throughput %]` -> `%`, `[MHz]` -> `MHz`; else None."""
    m = re.search(r"\[([^\]]*)\]\s*$", name)
    if not m or not m.group(1).strip():
        return None
    return "%" if m.group(1).strip().endswith("%") else m.group(1).strip()


def load(con, ex, run_devices=None):
    """The export's GPU metric samples into gpu_metric_samples for the run being loaded
    (DuckDB variables tracedb_run and tracedb_base_ns set); run_devices: only the
    samples of these GPUs (a run of one process of several). Returns (table read,
    rows inserted), or (None, 0) when the export has no samples. A table or value
    SQLite cannot read: IngestError naming the file."""
    try:
        return _load(con, ex, run_devices)
    except sqlite3.Error as e:
        raise IngestError(ex.path, f"its GPU metric samples cannot be read by SQLite ({e}); "
                                   "nothing was loaded") from None


def _load(con, ex, run_devices):
    table = table_of(ex, "samples")
    sel = _select(ex, table, "samples") if table else None
    if sel is None:
        return None, 0
    names = table_of(ex, "names")
    nsel = _select(ex, names, "names") if names else None
    con.execute("CREATE OR REPLACE TEMP TABLE _nsys_metric_names (type_id BIGINT, metric_id BIGINT, "
                "metric_name VARCHAR, unit VARCHAR)")
    if nsel:
        found = {}        # (type id or None, metric id) -> its first name
        for t, m, n in ex.con.execute(nsel):
            if n is not None:
                found.setdefault((t, m), n)
        con.executemany("INSERT INTO _nsys_metric_names VALUES (?, ?, ?, ?)",
                        [(t, m, str(n), unit(str(n))) for (t, m), n in found.items()])
    con.execute("SET VARIABLE tracedb_metric_devices = ?",
                [sorted(int(d) for d in run_devices) if run_devices is not None else None])
    script = sql_text("schema", "load/nsys_gpu_metrics.sql")
    before = scalar(con, "SELECT count(*) FROM gpu_metric_samples")
    try:
        for tbl in _batches(ex, table, sel):
            run_script_over(con, script, "_nsys_metric_raw", tbl)
    finally:
        con.execute("RESET VARIABLE tracedb_metric_devices")
        con.execute("DROP TABLE IF EXISTS _nsys_metric_names")
    return table, scalar(con, "SELECT count(*) FROM gpu_metric_samples") - before


def file_rows(ex, table):
    """The rows of the samples' table in the file (all GPUs)."""
    try:
        return ex.con.execute(f"SELECT count(*) FROM {ex.qid(table)}").fetchone()[0]
    except sqlite3.Error as e:
        raise IngestError(ex.path, f"its GPU metric samples cannot be read by SQLite ({e})") from None


NAMES = ["type_id", "ts", "metric_id", "value"]
TYPES = {"type_id": pa.int64(), "ts": pa.int64(), "metric_id": pa.int64(), "value": pa.float64()}


def _batches(ex, table, sel):
    """The rows of sel (over table) as Arrow tables of NAMES, in the table's rowid ranges
    (Export.rowid_spans, as the other tables are read): each range written by SQLite as
    one CSV text and parsed by Arrow (as nsys_csv.py reads the other tables: 5 M samples
    read in 5.8 s against about 10.6 s a tuple per row, on a shared 2-core machine), a
    range that does not parse (a value of another type than its column's) row by row; a
    table without rowids (a view) streamed row by row."""
    spans = ex.rowid_spans(table, BATCH_ROWS)
    if spans is None:
        yield from _row_batches(ex.con.execute(sel))
        return
    for a, b in spans:
        ranged = f"{sel} WHERE rowid BETWEEN {a} AND {b}"
        data, n = ex.con.execute(nsys_csv.csv_select(ranged, NAMES, set())).fetchone()
        if not n:
            continue
        try:
            tbl = pcsv.read_csv(io.BytesIO(data), read_options=pcsv.ReadOptions(column_names=NAMES, block_size=8 << 20),
                                convert_options=pcsv.ConvertOptions(column_types=TYPES, null_values=[""]))
            if tbl.num_rows != n:
                raise pa.ArrowInvalid(f"{tbl.num_rows} rows parsed of {n}")
            yield tbl
        except pa.ArrowInvalid:
            yield from _row_batches(ex.con.execute(ranged))


def _row_batches(cur):
    while batch := cur.fetchmany(BATCH_ROWS):
        cols = list(zip(*batch))
        yield pa.table({"type_id": _ints(cols[0]), "ts": _ints(cols[1]), "metric_id": _ints(cols[2]),
                        "value": _floats(cols[3])})


def _ints(values):
    try:
        return pa.array(values, pa.int64())
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError):
        # (SQLite types values, not columns: a value that is no whole number is no id or time)
        return pa.array([v if isinstance(v, int) and -(1 << 63) <= v < (1 << 63) else
                         int(v) if isinstance(v, float) and v.is_integer() else None for v in values], pa.int64())


def _floats(values):
    try:
        return pa.array(values, pa.float64())
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
        out = []
        for v in values:
            try:
                out.append(float(v) if v is not None else None)
            except (TypeError, ValueError):
                out.append(None)
        return pa.array(out, pa.float64())


