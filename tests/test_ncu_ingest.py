"""Nsight Compute ingest: raw and details CSV, units, the wide metrics view, bad input."""
import gzip

import pytest

from conftest import AMP_NCU, AMP_NCU_BASE, NCU, read_ncu_csv, write_ncu_csv
from tracedb.store.sql import rows, scalar
from tracedb.ingest import IngestError, ingest_file

SMALL = {form: NCU / f"h200_small_cnn_{form}.csv.gz"
         for form in ("raw", "raw_baseunits", "details", "details_names_baseunits")}


def num(text):
    return float(text.replace(",", ""))


@pytest.fixture(scope="module")
def ncu_db(tmp_path_factory):
    from tracedb.store import db
    con = db.connect(tmp_path_factory.mktemp("ncu") / "ncu.duckdb")
    for p in [AMP_NCU, AMP_NCU_BASE, *SMALL.values()]:
        ingest_file(con, p)
    yield con
    con.close()


def counters(con, run):
    return {(k, m): (v, u) for k, m, v, u in
            rows(con, "SELECT kernel_id, metric, value, unit FROM counters WHERE run = ?", [run])}


def test_raw_kernels_match_an_independent_parse(ncu_db):
    header, _, data = read_ncu_csv(AMP_NCU_BASE)
    ix = {n: i for i, n in enumerate(header)}
    got = {r[0]: r[1:] for r in rows(ncu_db, """
        SELECT kernel_id, name, grid_x, grid_y, grid_z, block_x, block_y, block_z,
               registers_per_thread, static_shared_mem_bytes, dynamic_shared_mem_bytes, dur_ns, stream
        FROM kernels WHERE run = 'h100_resnet50_bs64_amp_raw_baseunits'""")}
    assert len(got) == len(data) == 852
    for r in data:
        dims = lambda s: tuple(int(x) for x in s.strip("()").split(","))
        want = (r[ix["Kernel Name"]], *dims(r[ix["Grid Size"]]), *dims(r[ix["Block Size"]]),
                int(num(r[ix["launch__registers_per_thread"]])),
                int(num(r[ix["launch__shared_mem_per_block_static"]])),
                int(num(r[ix["launch__shared_mem_per_block_dynamic"]])),
                int(num(r[ix["gpu__time_duration.sum"]])), int(r[ix["Stream"]]))
        assert got[int(r[ix["ID"]])] == want


def test_every_metric_column_is_a_counter_in_base_units(ncu_db):
    header, units, data = read_ncu_csv(AMP_NCU)
    # empty cells are not counters: launch__kernel_name is empty in every row of this export
    metric_cols = [c for i, c in enumerate(header[11:], 11) if not c.startswith("device__attribute_")
                   and any(r[i] != "" for r in data)]
    assert len(metric_cols) == len(header[11:]) - sum(c.startswith("device__attribute_") for c in header) - 1
    n = scalar(ncu_db, "SELECT count(DISTINCT metric) FROM counters WHERE run = 'h100_resnet50_bs64_amp_raw'")
    assert n == len(metric_cols)
    # auto units in the file: ms, Kbyte, Gbyte, Ghz ... none left after conversion
    assert {"ms", "Kbyte/block", "Gbyte", "Ghz"} <= set(units)
    left = rows(ncu_db, "SELECT DISTINCT unit FROM counters WHERE regexp_matches(unit, '^[KMGT][a-z]|^(ms|us|msecond|usecond)$')")
    assert left == []
    c = counters(ncu_db, "h100_resnet50_bs64_amp_raw")
    ix = {n: i for i, n in enumerate(header)}
    first = data[0]
    assert c[(0, "gpu__time_duration.sum")] == (pytest.approx(num(first[ix["gpu__time_duration.sum"]]) * 1e6), "ns")
    assert c[(0, "launch__shared_mem_per_block")] == (pytest.approx(num(first[ix["launch__shared_mem_per_block"]]) * 1e3), "byte/block")
    assert c[(0, "smsp__cycles_elapsed.avg.per_second")][1] == "hz"


def test_auto_and_base_unit_exports_give_the_same_counters(ncu_db):
    auto, base = counters(ncu_db, "h100_resnet50_bs64_amp_raw"), counters(ncu_db, "h100_resnet50_bs64_amp_raw_baseunits")
    assert auto.keys() == base.keys()
    sums = [k for k in auto if k[1].endswith(".sum")]
    assert len(sums) > 852 * 20
    for k in sums:
        (a, ua), (b, ub) = auto[k], base[k]
        assert ua == ub
        assert a == pytest.approx(b, rel=1e-6, abs=1e-9), k


@pytest.mark.parametrize("details,raw", [("details_names_baseunits", "raw_baseunits"), ("details", "raw")])
def test_details_and_raw_exports_of_one_report_give_identical_counters(ncu_db, details, raw):
    d, r = counters(ncu_db, f"h200_small_cnn_{details}"), counters(ncu_db, f"h200_small_cnn_{raw}")
    assert len(d) == 42 * 88
    assert d.keys() <= r.keys()
    if details.endswith("baseunits"):
        assert all(d[k] == r[k] for k in d)
    else:   # auto units print ~2 decimals in details, 6 in raw: same counters, rounding apart
        assert all(d[k][1] == r[k][1] and d[k][0] == pytest.approx(r[k][0], rel=5e-3, abs=0.01) for k in d)
    kd = rows(ncu_db, f"SELECT name, grid_x, grid_y, grid_z, block_x, block_y, block_z, stream FROM kernels "
                      f"WHERE run = 'h200_small_cnn_{details}' ORDER BY kernel_id")
    kr = rows(ncu_db, f"SELECT name, grid_x, grid_y, grid_z, block_x, block_y, block_z, stream FROM kernels "
                      f"WHERE run = 'h200_small_cnn_{raw}' ORDER BY kernel_id")
    assert kd == kr and len(kd) == 42


def test_device_attributes_go_to_the_run(ncu_db):
    name, props = rows(ncu_db, "SELECT device_name, device_properties FROM runs WHERE run = 'h100_resnet50_bs64_amp_raw'")[0]
    assert name == "NVIDIA H100 80GB HBM3"
    import json
    assert json.loads(props)["multiprocessor_count"] == "132.0"
    assert scalar(ncu_db, "SELECT count(*) FROM counters WHERE metric LIKE 'device__attribute_%'") == 0


def test_wide_view_resolves_hopper_counters_and_names_them(ncu_db):
    got = rows(ncu_db, """SELECT DISTINCT smsp_cycles_elapsed_source, smsp_issue_active_source,
                                 tc_cycles_active_source, tc_inst_source
                          FROM ncu_kernel_metrics WHERE run = 'h100_resnet50_bs64_amp_raw_baseunits'""")
    assert got == [("smsp__cycles_elapsed.sum", "smsp__issue_active.sum",
                    "smsp__pipe_tensor_cycles_active.sum", "smsp__inst_executed_pipe_tensor_op_hmma.sum")]
    # The evidence behind metric_sources' notes: per-SM tensor cycles summed equal the SMSP sum,
    # and the hmma instruction counter includes warpgroup MMA (gmma) on Hopper.
    header, _, data = read_ncu_csv(AMP_NCU_BASE)
    ix = {n: i for i, n in enumerate(header)}
    gmma_kernels = 0
    for r in data:
        v = lambda m: num(r[ix[m]])
        assert v("sm__pipe_tensor_cycles_active.sum") == v("smsp__pipe_tensor_cycles_active.sum")
        hmma, gmma = v("smsp__inst_executed_pipe_tensor_op_hmma.sum"), v("smsp__inst_executed_pipe_tensor_op_gmma.sum")
        assert gmma == 0 or hmma == gmma
        gmma_kernels += gmma > 0
    assert gmma_kernels > 100


def test_wide_view_falls_back_on_other_architectures_counters(fresh_db, tmp_path):
    """A Volta/Ampere-style report (no smsp__pipe_tensor_cycles_active, SM-level elapsed cycles)."""
    header, units, data = read_ncu_csv(AMP_NCU_BASE)
    drop = {i for i, c in enumerate(header) if c.startswith(("smsp__pipe_tensor_cycles_active", "sm__pipe_tensor_cycles_active",
                                                             "smsp__cycles_elapsed"))}
    keep = lambda row: [v for i, v in enumerate(row) if i not in drop]
    header2 = [("sm__cycles_elapsed.sum" if c == "smsp__cycles_elapsed.max" else c) for c in header]
    ix = header.index("smsp__cycles_elapsed.sum")
    data2 = []
    for r in data[:10]:
        r = list(r)
        r[header.index("smsp__cycles_elapsed.max")] = str(num(r[ix]) / 4)
        data2.append(r)
    drop.discard(header.index("smsp__cycles_elapsed.max"))
    p = write_ncu_csv(tmp_path / "ampere_like.csv.gz", keep(header2), keep(units), [keep(r) for r in data2])
    ingest_file(fresh_db, p)
    got = rows(fresh_db, "SELECT kernel_id, smsp_cycles_elapsed, smsp_cycles_elapsed_source, tc_cycles_active_source "
                         "FROM ncu_kernel_metrics ORDER BY kernel_id")
    assert len(got) == 10
    for (k, e, es, ts), r in zip(got, data2):
        assert e == pytest.approx(num(r[ix]))
        assert es == "sm__cycles_elapsed.sum" and ts == "smsp__pipe_tensor_op_hmma_cycles_active.sum"


def test_prof_lines_and_app_output_around_the_csv_are_skipped(fresh_db, tmp_path):
    header, units, data = read_ncu_csv(AMP_NCU)
    p = tmp_path / "noisy.csv.gz"
    with gzip.open(p, "wt") as f:
        f.write("==PROF== Connected to process 549\n==WARNING== Note: Running with unmodified GPU clocks.\n")
        import csv
        w = csv.writer(f, quoting=csv.QUOTE_ALL, lineterminator="\n")
        w.writerow(header)
        w.writerow(units)
        for i, r in enumerate(data[:50]):
            w.writerow(r)
            if i == 20:
                f.write("epoch 1 loss 2.3\n==PROF== Disconnected from process 549\n")
    r = ingest_file(fresh_db, p)
    assert scalar(fresh_db, "SELECT count(*) FROM kernels WHERE run = ?", [r.run]) == 50
    assert "3 non-CSV lines skipped" in scalar(fresh_db, "SELECT metadata FROM runs WHERE run = ?", [r.run]) or \
        "non-CSV lines skipped" in scalar(fresh_db, "SELECT metadata FROM runs WHERE run = ?", [r.run])


def test_truncated_csv_drops_the_cut_line_with_a_warning(fresh_db, tmp_path):
    raw = gzip.open(AMP_NCU).read()
    cut = raw[: raw.index(b"\n", len(raw) // 2) + 200]       # 200 bytes into a row
    p = tmp_path / "cut.csv"
    p.write_bytes(cut)
    with pytest.warns(UserWarning, match="cut off"):
        r = ingest_file(fresh_db, p)
    whole_rows = cut.count(b"\n") - 2          # header and units rows
    assert scalar(fresh_db, "SELECT count(*) FROM kernels WHERE run = ?", [r.run]) == whole_rows


def test_text_and_nan_where_numbers_belong_are_kept_as_text(fresh_db, tmp_path):
    header, units, data = read_ncu_csv(AMP_NCU_BASE)
    data = [list(r) for r in data[:3]]
    ix = header.index("smsp__cycles_active.sum")
    data[0][ix], data[1][ix], data[2][ix] = "abc", "n/a", "nan"
    p = write_ncu_csv(tmp_path / "odd.csv.gz", header, units, data)
    r = ingest_file(fresh_db, p)
    got = rows(fresh_db, "SELECT kernel_id, value, text_value FROM counters WHERE run = ? AND metric = 'smsp__cycles_active.sum' ORDER BY 1", [r.run])
    assert got[0] == (0, None, "abc") and got[1] == (1, None, "n/a")
    assert got[2][1] is None or got[2][1] != got[2][1]        # NaN stays NaN, never a number
    assert scalar(fresh_db, "SELECT smsp_cycles_active FROM ncu_kernel_metrics WHERE run = ? AND kernel_id = 2", [r.run]) is None


@pytest.mark.parametrize("content,words", [
    ("==PROF== Connected\n==PROF== Disconnected\n", "no header"),
    ('"ID","Process ID","Kernel Name","gpu__time_duration.sum"\n"","","","ns"\n', "no profiled kernels"),
    ('"ID","Process ID","Kernel Name","Context"\n"0","1","k","1"\n', "no metric columns"),
    ('"ID","Process ID","Context"\n"0","1","1"\n', "Kernel Name"),
])
def test_bad_ncu_files_are_refused_and_lose_nothing(fresh_db, tmp_path, content, words):
    ingest_file(fresh_db, SMALL["raw"])
    before = rows(fresh_db, "SELECT count(*) FROM counters")
    p = tmp_path / "bad.csv"
    p.write_text(content)
    with pytest.raises(IngestError, match=words) as e:
        ingest_file(fresh_db, p)
    assert str(p) in str(e.value)
    assert rows(fresh_db, "SELECT count(*) FROM counters") == before
    assert scalar(fresh_db, "SELECT count(*) FROM runs") == 1


def test_same_report_twice_is_skipped(fresh_db):
    assert ingest_file(fresh_db, SMALL["raw"]).status == "loaded"
    r = ingest_file(fresh_db, SMALL["raw"])
    assert r.status == "skipped"
    assert scalar(fresh_db, "SELECT count(*) FROM kernels") == 42


def test_ncu_rep_without_the_module_says_to_export_csv(fresh_db, tmp_path, monkeypatch):
    from tracedb.ingest import ncu_rep
    if ncu_rep.find_ncu_report() is not None:
        pytest.skip("ncu_report is importable here; tests/test_ncu_rep_device.py covers it")
    p = tmp_path / "r.ncu-rep"
    p.write_bytes(b"NVIDIA Nsight Compute report")
    with pytest.raises(IngestError, match="export CSV with `ncu --import"):
        ingest_file(fresh_db, p)


def test_details_with_labels_and_rule_columns(fresh_db, tmp_path):
    """Newer ncu adds rule columns; without --print-metric-name name, names are labels."""
    import csv
    with gzip.open(SMALL["details_names_baseunits"], "rt", newline="") as f:
        rows_ = list(csv.reader(f))
    header = rows_[0] + ["Rule Name", "Rule Type", "Rule Description", "Estimated Speedup Type", "Estimated Speedup"]
    mi = header.index("Metric Name")
    out = []
    for r in rows_[1:]:
        r = r + ["", "", "", "", ""]
        if r[mi] == "gpu__time_duration.sum":
            r[mi] = "Duration"
        out.append(r)
    rule = list(out[0])
    rule[mi], rule[mi + 1], rule[mi + 2] = "", "", ""
    rule[-5:] = ["SOLBottleneck", "OPT", "This kernel exhibits low compute throughput", "global", "12.5"]
    out.insert(1, rule)
    p = write_ncu_csv(tmp_path / "details_labels.csv.gz", header, None, out)
    r = ingest_file(fresh_db, p)
    got = dict(rows(fresh_db, "SELECT kernel_id, value FROM counters WHERE run = ? AND metric = 'gpu__time_duration.sum'", [r.run]))
    assert len(got) == 42
    want = {int(x[0]): num(x[header.index("Metric Value")]) for x in rows_[1:] if x[mi] == "gpu__time_duration.sum"}
    assert got == want
    assert scalar(fresh_db, "SELECT count(DISTINCT metric) FROM counters WHERE run = ?", [r.run]) == 88
