"""Numbers and names for people (humanize.py): the unit suffix picks the display,
names are shortened one way and stay distinct; the machine formats keep exact values."""
import gzip
import json
import re

import pytest

from tracedb.store import db
from tracedb.present import humanize
from tracedb.present import output
from tracedb.query import reports
from tracedb.ingest import ingest_file

from conftest import AMP_TRACE, DATA

LOADER = DATA / "torch_loader" / "loader_slow.json.gz"


@pytest.fixture(scope="module")
def con(tmp_path_factory):
    """Two real traces: the amp ResNet-50 (one iteration) and the loader run (four)."""
    c = db.connect(tmp_path_factory.mktemp("hum") / "h.duckdb")
    ingest_file(c, AMP_TRACE)
    ingest_file(c, LOADER)
    yield c
    c.close()


def kernel_names(path):
    """Every GPU kernel name of a trace, read from the file (independent of the database)."""
    with gzip.open(path, "rt") as f:
        doc = json.load(f)
    return {e["name"] for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "kernel"}


def test_units_by_suffix():
    assert humanize.value("total_ns", 63812784) == "63.81 ms"
    assert humanize.value("mean_ns", 1500) == "1.500 µs"
    assert humanize.value("total_ns", 2_500_000_000) == "2.500 s"
    assert humanize.value("smsp_cycles_elapsed", 24603829728.0) == "24,603,829,728"    # a count, not a float
    assert humanize.value("peak_bytes", 81_234_567_890) == "81.23 GB"
    assert humanize.value("gpu_util_pct", 42.98286297920344) == "43.0 %"
    assert humanize.value("ratio", 0.123456789) == "0.1235"
    assert humanize.value("iteration", 12345) == "12345"                                 # an id: no separators
    assert humanize.value("launches", 12345) == "12,345"
    # a table column: one unit for the column, in its header, picked by its median
    assert humanize.column("total_ns", [55711959, 23946595, None]) == ("total (ms)", ["55.71", "23.95", ""])
    assert humanize.column("mean_ns", [318729.4, 1500.2, 15795.2]) == ("mean (µs)", ["318.7", "1.500", "15.80"])
    assert humanize.column("smsp_active_pct_iter", [9.331]) == ("smsp_active (% of iter)", ["9.3"])


def test_every_kernel_name_of_a_trace_stays_distinct_and_short():
    for path in (AMP_TRACE, LOADER, DATA / "torch" / "h100_bert_bs16_amp.json.gz"):
        names = kernel_names(path)
        short = humanize.short_names(names)
        assert len(set(short.values())) == len(names), path        # distinct names kept distinct
        for full, s in short.items():
            assert "::" not in s or "lambda" in s or full.startswith(s) or s in full
            assert len(s) <= len(full)
    mt = "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::" \
         "TensorListMetadata<2>, at::native::(anonymous namespace)::BinaryOpListAlphaFunctor<float, 2, 2, 0>, " \
         "std::plus<float>, float>(at::native::(anonymous namespace)::TensorListMetadata<2>, float)"
    assert humanize.short_name(mt) == "multi_tensor_apply_kernel<…>"
    assert humanize.short_names([mt]) == {mt: "multi_tensor_apply_kernel<…>"}
    # two launches of one template with other arguments: the arguments come back, shortened
    a = "void at::native::vectorized_elementwise_kernel<8, at::native::CUDAFunctor_add<c10::Half>, std::array<char*, 3ul> >(int)"
    b = "void at::native::vectorized_elementwise_kernel<8, at::native::FillFunctor<c10::Half>, std::array<char*, 1ul> >(int)"
    assert humanize.short_names([a, b]) == {a: "vectorized_elementwise_kernel<8, CUDAFunctor_add<…>, array<…>>",
                                            b: "vectorized_elementwise_kernel<8, FillFunctor<…>, array<…>>"}
    # names that are no C++ symbol are left alone; ops lose their namespace
    assert humanize.short_name("Memcpy HtoD (Pageable -> Device)") == "Memcpy HtoD (Pageable -> Device)"
    assert humanize.short_name("aten::convolution_backward") == "convolution_backward"
    assert humanize.short_names(["aten::add", "my::add"]) == {"aten::add": "aten::add", "my::add": "my::add"}


def test_gpu_utilization_is_a_table_at_160_columns(con):
    table = reports.run(con, "gpu_utilization", {})
    assert table.num_rows == 5
    text = output.render(table, width=160)
    lines = text.splitlines()
    assert all(len(l) <= 160 for l in lines) and not text.startswith("-[ row")
    head = text.split("\u2500")[0]
    assert {"total", "gpu_util", "(ms)", "(%)"} <= set(head.split())     # headers wrap at the unit
    for r in table.to_pylist():         # each row on its line, the time in ms to 4 digits
        row = next(l for l in lines if re.match(rf"{re.escape(r['run'][:14])}\s+{r['iteration']}\s", l))
        assert humanize.sig(r["total_ns"] / 1e6) in row.split()


def test_machine_formats_keep_exact_values(con, tmp_path):
    table = reports.run(con, "top_kernels", {"limit": "5"})
    for fmt in ("csv", "json", "parquet"):
        out = tmp_path / f"t.{fmt}"
        output.write(table, fmt, out)
    got = json.loads((tmp_path / "t.json").read_text())
    assert [g["total_ns"] for g in got] == table.column("total_ns").to_pylist()
    assert [g["name"] for g in got] == table.column("name").to_pylist()        # full names
    assert table.column("name")[0].as_py() in (tmp_path / "t.csv").read_text()
