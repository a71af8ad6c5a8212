"""The Nsight Systems load made cheaper per event (the NVTX ranges' op names, sequence
numbers and input dims found without the regexes where their text cannot match them;
the kernels' launch fields in the derivation's _gpu taken from the export's columns,
schema/load/nsys_gpu.sql, and not parsed back out of the args JSON built of them;
their names held as an ENUM there)
writes exactly what the code before it did: every table of an ingest, row for row,
and the kernels in the order they were written, against the ingest by a frozen copy
of that code (tests/nsys_before/: ingest/nsys.py and schema/load/nsys_rows.sql as
they were; the rest of the derivation is today's for both), on each committed export
that loads, read by the reading thread, row by row (the fallback for values of
another type) and by worker processes staging files, and with iterations from an
NVTX range (--iterations-from); and the NVTX section alone on
texts made to be near misses of the patterns."""
import importlib.util
import itertools
import re
from pathlib import Path

import pyarrow as pa
import pytest

from conftest import DATA
from test_derive_exact import _tables
from tracedb.ingest import ingest_file, nsys
from tracedb.store import db
from tracedb.store.catalog import sql_text

BEFORE = Path(__file__).parent / "nsys_before"
EXPORTS = [DATA / "nsys" / f"{n}.sqlite.gz"
           for n in ("h100_2gpu_1s", "healthy_1pct", "mfu_2gpu_before", "mock", "wb2_report1")]


def _frozen():
    """The frozen ingest/nsys.py, as a module of the package (its relative imports work),
    reading the frozen nsys_rows.sql."""
    spec = importlib.util.spec_from_file_location("tracedb.ingest._nsys_before", BEFORE / "nsys.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.sql_text = lambda kind, name: ((BEFORE / "nsys_rows.sql").read_text() if name == "load/nsys_rows.sql"
                                       else sql_text(kind, name))
    return mod


FROZEN = _frozen()


def _ingest(path, dbpath, marker=None):
    con = db.connect(dbpath)
    try:
        ingest_file(con, path, run="r", options={"iterations_from": marker} if marker else None)
        return _tables(con)
    finally:
        con.close()


# (the other reads on one export only, kept fast: the one with the most rows)
CASES = [(p, "thread") for p in EXPORTS] + [(DATA / "nsys" / "mfu_2gpu_before.sqlite.gz", h)
                                            for h in ("rows", "workers", "marker")]


@pytest.mark.parametrize("path,how", CASES, ids=lambda v: v if isinstance(v, str) else v.name.split(".")[0])
def test_nsys_ingest_equals_the_frozen_one(path, how, tmp_path, monkeypatch):
    with monkeypatch.context() as m:
        if how == "rows":
            m.setattr(nsys, "BULK", False)
        if how == "workers":      # (worker processes staging Parquet files, loaded in parts)
            m.setattr(nsys, "PROCESS_READERS", 2)
            m.setattr(nsys, "PROCESS_MIN_ROWS", 0)
        # ("marker": iterations from an NVTX range, FlashAttnFunc: the kernels' iteration and iterations)
        marker = "FlashAttnFunc" if how == "marker" else None
        kept, real = [], nsys._derive        # (the kernels' fields kept for nsys_gpu.sql when it runs)
        m.setattr(nsys, "_derive", lambda con, run: kept.append(
            con.execute("SELECT count(*) FROM _nsys_gpu_fields").fetchone()[0]) or real(con, run))
        after = _ingest(path, tmp_path / "after.duckdb", marker)
    with monkeypatch.context() as m:
        m.setattr(nsys, "_load", FROZEN._load)
        before = _ingest(path, tmp_path / "before.duckdb", marker)
    assert before["events"] and before["kernels"]
    assert bool(before["iterations"]) == (how == "marker")
    assert kept == [sum(1 for k in after["kernels"] if k[2] == "kernel")]     # (every kernel: none read from args)
    assert before.keys() == after.keys()
    for t in before:
        assert after[t] == before[t], t
    # (the frozen code is the code before the change, and the change is in use)
    assert (BEFORE / "nsys_rows.sql").read_text() != sql_text("schema", "load/nsys_rows.sql")
    assert "kernel_fields" in nsys._sections()


def _nvtx(text):
    parts = re.split(r"^-- @section (\w+)\s*$", text, flags=re.M)
    return parts[parts.index("nvtx") + 1]


def test_nvtx_section_equals_the_frozen_one_on_near_misses():
    """Op name, category, Sequence number and Input Dims of texts built of pieces of the
    patterns, whole and cut (a minus with no digit, a number at the end of the text,
    an accented letter, a line break where a digit is looked for ...): the same rows
    as the frozen section's."""
    pieces = ["aten::mm", "", ", seq = ", ", seq = 5", ", seq = -5", ", seq = -", ", seq = x", ", op_id = ",
              ", op_id = 7", ", op_id = x", ", sizes = [", ", sizes = [[2, 3], [3, 4]]", ", sizes = []", "é", "\n",
              "9", "-", "٣", ", seq = 99999999999999999999999"]
    texts = sorted({a + b + c for a, b, c in itertools.product(pieces, repeat=3)})
    n = len(texts)
    ints = pa.array([None] * n, pa.int64())
    raw = pa.table({"pos": range(n), "start_ns": [1] * n, "end_ns": [2] * n, "event_type": [59] * n, "text": texts,
                    "text_id": ints, "gtid": [5] * n, "end_gtid": ints, "domain_id": [0] * n, "category": ints,
                    "color": ints, "payload": pa.array([None] * n, pa.string()), "json_text_id": ints})
    con = db.connect(":memory:")
    con.execute("CREATE TEMP TABLE _nsys_strings (id BIGINT, value VARCHAR); "
                "CREATE TEMP TABLE _nsys_nvtx_domains (id BIGINT, name VARCHAR); "
                "CREATE TEMP TABLE _nsys_nvtx_categories (domain_id BIGINT, id BIGINT, name VARCHAR)")
    got = {}
    for who, text in (("now", sql_text("schema", "load/nsys_rows.sql")),
                      ("before", (BEFORE / "nsys_rows.sql").read_text())):
        got[who] = con.from_arrow(raw).query(
            "_nsys_raw", f"SELECT cat, name, CAST(args AS VARCHAR) FROM ({_nvtx(text)}) ORDER BY pos").fetchall()
    assert len(got["now"]) == n
    assert sum(r[0] == "cpu_op" for r in got["now"]) > n // 2            # (ops and plain ranges both)
    assert sum('"Input Dims":[[2,3],[3,4]]' in r[2] for r in got["now"]) > 100
    assert got["now"] == got["before"]
