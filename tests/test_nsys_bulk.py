"""The bulk read of an Nsight Systems export (ingest/nsys_csv.py: SQLite writes a
range of rows as one CSV text, Arrow parses it): its rows are those of a plain
sqlite3 reading of the same file, written here with the exports' own column names
(not through the reader), and the same Arrow tables the row-at-a-time read gives,
also where text holds quotes, commas, line breaks and where values are not of their
column's type (such a range is read row by row)."""
import gzip
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from tracedb.ingest import ingest_file, nsys, nsys_csv
from tracedb.store import db

NSYS = Path(__file__).parent / "data" / "nsys"
# kind -> the columns of the exports' tables, in the reader's order (SCHEMA's names for them)
RAW = {
    "kernel": ("CUPTI_ACTIVITY_KIND_KERNEL", """start, "end", deviceId, contextId, streamId, correlationId,
        globalPid, demangledName, shortName, registersPerThread, gridX, gridY, gridZ, blockX, blockY, blockZ,
        staticSharedMemory, dynamicSharedMemory, launchType, graphId, graphNodeId""", ""),
    "runtime": ("CUPTI_ACTIVITY_KIND_RUNTIME", """start, "end", globalTid, correlationId, nameId, returnValue,
        eventClass""", ""),
    "memcpy": ("CUPTI_ACTIVITY_KIND_MEMCPY", """start, "end", deviceId, contextId, streamId, correlationId,
        globalPid, bytes, copyKind, srcKind, dstKind, srcDeviceId, dstDeviceId, graphNodeId""", ""),
    "memset": ("CUPTI_ACTIVITY_KIND_MEMSET", """start, "end", deviceId, contextId, streamId, correlationId,
        globalPid, bytes, memKind, value, graphNodeId""", ""),
    "nvtx": ("NVTX_EVENTS", """start, "end", eventType, text, textId, globalTid, endGlobalTid, domainId,
        category, color, coalesce(CAST(int64Value AS TEXT), CAST(uint64Value AS TEXT), CAST(doubleValue AS TEXT),
        CAST(uint32Value AS TEXT), CAST(int32Value AS TEXT), CAST(floatValue AS TEXT), jsonText), jsonTextId""",
             "WHERE eventType IN (34, 59, 60)"),
}


@pytest.fixture(scope="module")
def mfu(tmp_path_factory):
    p = tmp_path_factory.mktemp("bulk") / "mfu.sqlite"
    p.write_bytes(gzip.decompress((NSYS / "mfu_2gpu_before.sqlite.gz").read_bytes()))
    return p


def read_all(path, bulk, monkeypatch):
    """kind -> the reader's batches of path concatenated, BULK as asked."""
    monkeypatch.setattr(nsys, "BULK", bulk)
    ex = nsys.Export(str(path), str(path))
    try:
        got = {}
        for kind, batch in nsys._read_batches(ex):
            if batch is not None:
                got.setdefault(kind, []).append(batch)
        return {k: pa.concat_tables(v) for k, v in got.items()}
    finally:
        ex.close()


def plain_rows(path, kind):
    table, cols, where = RAW[kind]
    c = sqlite3.connect(path)
    try:
        return c.execute(f"SELECT {cols} FROM {table} {where} ORDER BY rowid").fetchall()
    finally:
        c.close()


def rows_of(table):
    """The rows of an Arrow batch, without pos, as tuples."""
    return list(zip(*(table.column(n).to_pylist() for n in table.column_names[1:])))


@pytest.mark.parametrize("batch_rows", [1 << 19, 3000])
def test_bulk_rows_equal_a_plain_sqlite_reading(mfu, monkeypatch, batch_rows):
    """Every kind's rows, in rowid order, equal plain sqlite3's, in one range or in
    ranges of 3000 rowids; and the bulk parse is what read them."""
    monkeypatch.setattr(nsys, "BATCH_ROWS", batch_rows)
    parsed = []
    real = nsys_csv.parse
    monkeypatch.setattr(nsys_csv, "parse", lambda *a: parsed.append(a[3]) or real(*a))
    got = read_all(mfu, True, monkeypatch)
    assert set(got) == set(RAW)
    for kind in RAW:
        raw = plain_rows(mfu, kind)
        assert rows_of(got[kind]) == raw and len(raw) > 200
        if batch_rows > len(raw):        # (one range: pos counts the rows)
            assert got[kind].column("pos").to_pylist() == list(range(len(raw)))
    assert sum(parsed) == sum(len(plain_rows(mfu, k)) for k in RAW)


def test_bulk_and_row_by_row_give_the_same_tables(mfu, monkeypatch):
    bulk = read_all(mfu, True, monkeypatch)
    rows = read_all(mfu, False, monkeypatch)
    assert bulk.keys() == rows.keys()
    for kind in bulk:
        assert bulk[kind].equals(rows[kind]), kind


HOSTILE = ['a, "quoted" text', 'two\nlines', 'cr\r\nlf', '', '(NULL)', 'NULL', 'é ü 中文 \U0001F600', ',', '"',
           ' spaces ', 'aten::mm, seq = 5, op_id = 12, sizes = [[2, 3], [3, 4]]',
           # (op names: the text before the first ', seq = N' / ', op_id = N' / ', sizes = [')
           'a, op_id = x, seq = 5', ', seq = 1', 'x, seq = -3', 'nccl, b, sizes = [[1]]', 'y, seq = ', 'two\nline op, seq = 2']


@pytest.fixture(scope="module")
def hostile(tmp_path_factory, mfu):
    """mfu with NVTX texts that CSV must quote, line breaks in them, an empty text
    beside NULL ones, and a kernel whose gridX is a fraction (no integer: its range
    is read row by row)."""
    p = tmp_path_factory.mktemp("hostile") / "hostile.sqlite"
    shutil.copy(mfu, p)
    c = sqlite3.connect(p)
    ids = [r[0] for r in c.execute("SELECT rowid FROM NVTX_EVENTS WHERE eventType = 59 AND text IS NOT NULL "
                                   f"ORDER BY rowid LIMIT {len(HOSTILE)}")]
    c.executemany("UPDATE NVTX_EVENTS SET text = ? WHERE rowid = ?", list(zip(HOSTILE, ids)))
    c.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET gridX = 2.5 WHERE rowid = (SELECT min(rowid) FROM "
              "CUPTI_ACTIVITY_KIND_KERNEL)")
    c.commit()
    c.close()
    return p


def test_hostile_text_and_a_value_of_another_type(hostile, monkeypatch):
    monkeypatch.setattr(nsys, "BATCH_ROWS", 20000)
    fell_back = []
    real = nsys._arrow
    monkeypatch.setattr(nsys, "_arrow", lambda rows, names: fell_back.append(names[2]) or real(rows, names))
    bulk = read_all(hostile, True, monkeypatch)
    texts = bulk["nvtx"].column("text").to_pylist()
    assert [t for t in texts if t in HOSTILE] == HOSTILE
    assert rows_of(bulk["nvtx"]) == plain_rows(hostile, "nvtx")
    # the kernel range with 2.5 in it, alone, was read row by row (where Arrow makes it 2)
    assert fell_back == ["device"]
    kernels = rows_of(bulk["kernel"])
    raw = plain_rows(hostile, "kernel")
    assert raw[0][10] == 2.5 and kernels[0][10] == 2
    assert kernels[1:] == raw[1:]
    rows = read_all(hostile, False, monkeypatch)
    assert all(bulk[k].equals(rows[k]) for k in bulk)


def test_hostile_text_reaches_the_events(hostile, tmp_path):
    """Ingested, each hostile text is an NVTX range's text as written, named as
    PyTorch's emit_nvtx format says (the regex here, applied in Python)."""
    import re
    con = db.connect(tmp_path / "h.duckdb")
    ingest_file(con, str(hostile), run="h")
    got = dict(con.execute("SELECT args->>'nvtx text', name FROM events WHERE run = 'h' AND "
                           "args->>'nvtx text' IN (SELECT unnest(?))", [HOSTILE]).fetchall())
    con.close()
    op = re.compile(r"^(.+?), (seq = -?\d+|op_id = \d+|sizes = \[)", re.S)
    assert got == {t: (m.group(1) if (m := op.match(t)) else t) for t in HOSTILE}
    assert got['two\nlines'] == 'two\nlines' and got[HOSTILE[10]] == "aten::mm" and got['a, op_id = x, seq = 5'] == "a, op_id = x"


def test_csv_select_of_no_rows(mfu):
    c = sqlite3.connect(mfu)
    names = list(nsys.SCHEMA["memset"][1])
    ex = nsys.Export(str(mfu), str(mfu))
    try:
        sel = ex.source("memset")[1] + " WHERE 0"
        assert c.execute(nsys_csv.csv_select(sel, names, nsys._TEXT)).fetchone() == (None, 0)
        assert nsys._range_batch(ex, "memset", -10, -1) is None
    finally:
        ex.close()
        c.close()


def test_an_export_with_sampled_gpu_metrics_loads_the_rest(mfu, tmp_path):
    """No public export with GPU_METRICS was found (tests/data/nsys/README.md): a copy
    of a real one given the two tables nsys writes for --gpu-metrics-devices (their
    columns as nsys documents them; 3 samples) loads the same events as the original,
    and its 3 samples (tests/test_nsys_gpu_metrics.py tests them further); the ingest
    says they were loaded."""
    p = tmp_path / "metrics.sqlite"
    shutil.copy(mfu, p)
    c = sqlite3.connect(p)
    c.execute("CREATE TABLE TARGET_INFO_GPU_METRICS (typeId INTEGER NOT NULL, sourceId INTEGER NOT NULL, "
              "typeName TEXT NOT NULL, metricId INTEGER NOT NULL, metricName TEXT NOT NULL)")
    c.execute("CREATE TABLE GPU_METRICS (typeId INTEGER NOT NULL, timestamp INTEGER, metricId INTEGER NOT NULL, "
              "value INTEGER NOT NULL)")
    c.execute("INSERT INTO TARGET_INFO_GPU_METRICS VALUES (0, 0, 'GH100', 1, 'SMs Active [Throughput %]')")
    c.executemany("INSERT INTO GPU_METRICS VALUES (0, ?, 1, ?)", [(60120000000, 40), (60120010000, 55),
                                                                 (60120020000, 61)])
    c.commit()
    c.close()
    con = db.connect(tmp_path / "m.duckdb")
    a = ingest_file(con, str(mfu), run="a")
    b = ingest_file(con, str(p), run="b")
    digest = """SELECT count(*), sum(hash(event_id, ph, cat, name, pid, tid, ts_ns, dur_ns, correlation,
                CAST(args AS VARCHAR))) FROM events WHERE run = ?"""
    assert con.execute(digest, ["a"]).fetchone() == con.execute(digest, ["b"]).fetchone()
    (line,), = con.execute("SELECT message FROM ingest_log WHERE run = 'b' AND level = 'info'").fetchall()
    samples = con.execute("SELECT device, metric, unit, list(value ORDER BY ts_ns) FROM gpu_metric_samples "
                          "GROUP BY ALL").fetchall()
    con.close()
    assert a.status == b.status == "loaded"
    assert "GPU metric" not in line
    assert samples == [(0, "SMs Active [Throughput %]", "%", [40.0, 55.0, 61.0])]
    out = subprocess.run([sys.executable, "-m", "tracedb.cli", "ingest", "--db", str(tmp_path / "c.duckdb"), str(p)],
                         capture_output=True, text=True)
    assert out.returncode == 0 and "3 sampled GPU metric values loaded (1 metric, GPU 0)" in out.stdout


def test_a_table_without_rowids_is_streamed(mfu, tmp_path, monkeypatch):
    """A view has no rowid ranges: a copy of the export whose kernels are read through
    a later-versioned view of them (CUPTI_ACTIVITY_KIND_KERNEL_V9) is streamed in
    batches of BATCH_ROWS rows and gives plain sqlite3's kernels."""
    p = tmp_path / "view.sqlite"
    shutil.copy(mfu, p)
    c = sqlite3.connect(p)
    c.execute("CREATE VIEW CUPTI_ACTIVITY_KIND_KERNEL_V9 AS SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL")
    c.commit()
    c.close()
    monkeypatch.setattr(nsys, "BATCH_ROWS", 1000)
    ex = nsys.Export(str(p), str(p))
    try:
        assert ex.table_of("kernel") == "CUPTI_ACTIVITY_KIND_KERNEL_V9"
        batches = [b for k, b in nsys._read_batches(ex) if k == "kernel" and b is not None]
    finally:
        ex.close()
    raw = plain_rows(mfu, "kernel")
    assert [b.num_rows for b in batches] == [1000] * (len(raw) // 1000) + [len(raw) % 1000]
    assert rows_of(pa.concat_tables(batches)) == raw


@pytest.mark.parametrize("spread", [10, 10 ** 9])
def test_rowids_far_apart(mfu, tmp_path, monkeypatch, spread):
    """A table whose rowids are not dense (each NVTX rowid times 10: ranges of 3000
    rowids hold about 300 rows; times 10^9: so far apart that the ranges are cut at
    every 3000 rows counted instead) is read whole, in rowid order: plain sqlite3's rows."""
    p = tmp_path / "apart.sqlite"
    shutil.copy(mfu, p)
    c = sqlite3.connect(p)
    c.execute(f"UPDATE NVTX_EVENTS SET rowid = rowid * {spread} + 1000000000")    # (above every old rowid)
    c.commit()
    (lo, hi, n), = c.execute("SELECT min(rowid), max(rowid), count(*) FROM NVTX_EVENTS").fetchall()
    c.close()
    monkeypatch.setattr(nsys, "BATCH_ROWS", 3000)
    ex = nsys.Export(str(p), str(p))
    try:
        ranges = [r for r in nsys._rowid_ranges(ex) if r[0] == "nvtx" and r[3]]
    finally:
        ex.close()
    raw = plain_rows(mfu, "nvtx")
    assert len(ranges) == (-(-(hi - lo + 1) // 3000) if spread == 10 else -(-n // 3000))
    got = read_all(p, True, monkeypatch)
    assert rows_of(got["nvtx"]) == raw and len(raw) > 1000


@pytest.mark.parametrize("readers", [0, 2])
def test_reading_stopped_early_ends(mfu, monkeypatch, readers):
    """A load that stops after its first batches (an error while loading them) stops
    the reading: the reading thread ends, the worker processes too, and the staged
    files go with the scratch directory."""
    import multiprocessing
    import threading
    monkeypatch.setattr(nsys, "BATCH_ROWS", 1000)
    monkeypatch.setattr(nsys, "PROCESS_READERS", readers)
    monkeypatch.setattr(nsys, "PROCESS_MIN_ROWS", 0)
    ex = nsys.Export(str(mfu), str(mfu))
    try:
        got = nsys._read_batches(ex)
        first = [next(got) for _ in range(4)]
        assert [k for k, _ in first] == ["runtime"] * 4 and first[1][1].num_rows > 0
        assert any(t.name == "nsys-reader" for t in threading.enumerate())
        assert len(multiprocessing.active_children()) == readers
        got.close()
    finally:
        ex.close()
    assert not any(t.name == "nsys-reader" for t in threading.enumerate())
    assert multiprocessing.active_children() == []
