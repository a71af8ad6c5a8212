"""Sampled GPU metrics of an Nsight Systems export (nsys --gpu-metrics-devices):
loaded into gpu_metric_samples and averaged per iteration by gpu_metric_levels.

No public export holding them was found (tests/data/nsys/README.md): the export is
a real one (mfu_2gpu_before) given the two tables with NVIDIA's documented schema by
tests/data/nsys/make_gpu_metrics.py, its values chosen so that the levels are known
by construction (SM active 100% exactly while a kernel of the GPU runs, 0 otherwise;
SM issue 60% and tensor active 25% likewise; DRAM read 30% and write 12% always).
Samples are compared with plain sqlite3 reading the file, levels with the kernels'
busy time read from the file the same way."""
import importlib.util
import json
import sqlite3
from pathlib import Path

import pytest

from tracedb.ingest import ingest_file
from tracedb.ingest.nsys import NsysReader
from tracedb.query import reports
from tracedb.store import db

NSYS = Path(__file__).parent / "data" / "nsys"


def _maker():
    spec = importlib.util.spec_from_file_location("make_gpu_metrics", NSYS / "make_gpu_metrics.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    return _maker().make(str(tmp_path_factory.mktemp("nsys_metrics") / "metrics.sqlite"))


@pytest.fixture(scope="module")
def mdb(made, tmp_path_factory):
    con = db.connect(tmp_path_factory.mktemp("nsys_metrics_db") / "m.duckdb")
    r = ingest_file(con, made, run="m", options={"iterations_from": "FlashAttnFunc"})
    assert r.status == "loaded"
    r = ingest_file(con, str(NSYS / "mfu_2gpu_before.sqlite.gz"), run="plain",
                    options={"iterations_from": "FlashAttnFunc"})
    assert r.status == "loaded"
    yield con
    con.close()


def q(path, sql, params=()):
    c = sqlite3.connect(path)
    try:
        return c.execute(sql, params).fetchall()
    finally:
        c.close()


def test_samples_equal_an_independent_read_of_the_file(made, mdb):
    """Count, sum and time span per GPU and metric, against sqlite3 over the two tables."""
    base = q(made, "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME")[0][0]
    want = {(d, name): (n, float(s), lo + base, hi + base) for d, name, n, s, lo, hi in q(
        made, "SELECT g.typeId & 255, t.metricName, count(*), sum(g.value), min(g.timestamp), max(g.timestamp) "
              "FROM GPU_METRICS g JOIN TARGET_INFO_GPU_METRICS t USING (typeId, metricId) GROUP BY 1, 2")}
    got = {(d, name): (n, s, lo, hi) for d, name, n, s, lo, hi in mdb.execute(
        "SELECT device, metric, count(*), sum(value), min(ts_ns), max(ts_ns) FROM gpu_metric_samples "
        "WHERE run = 'm' GROUP BY 1, 2").fetchall()}
    assert got == want and len(want) == 12            # 6 metrics x 2 GPUs
    units = dict(mdb.execute("SELECT DISTINCT metric, unit FROM gpu_metric_samples WHERE run = 'm'").fetchall())
    assert units["SMs Active [Throughput %]"] == "%" and units["GPC Clock Frequency [MHz]"] == "MHz"
    # the GPUs are those the kernels ran on
    kdev = {d for d, in mdb.execute("SELECT DISTINCT device FROM kernels WHERE run = 'm'").fetchall()}
    assert {d for d, _ in got} == kdev == {0, 1}


def _busy(made, device, lo, hi, base):
    """ns of [lo, hi) (epoch ns) during which a kernel of the device ran: the union of
    the file's kernel intervals, read with sqlite3."""
    total, cur = 0, None
    for s, e in q(made, "SELECT start + ?, end + ? FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE deviceId = ? "
                        "ORDER BY start", (base, base, device)):
        s, e = max(s, lo), min(e, hi)
        if e <= s:
            continue
        if cur and s <= cur[1]:
            cur[1] = max(cur[1], e)
        else:
            if cur:
                total += cur[1] - cur[0]
            cur = [s, e]
    return total + (cur[1] - cur[0] if cur else 0)


def test_levels_equal_the_values_known_by_construction(made, mdb):
    base = q(made, "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME")[0][0]
    rows = reports.run(mdb, "gpu_metric_levels", {"run": "m"}).to_pylist()
    its = {i: (s, e, d) for i, s, e, d in mdb.execute(
        "SELECT iteration, start_ns, end_ns, dur_ns FROM iterations WHERE run = 'm'").fetchall()}
    assert len(rows) == 2 * len(its) and len(its) > 10
    levels = set()
    for r in rows:
        s, e, d = its[r["iteration"]]
        assert r["total_ns"] == d and r["covered_pct"] == 100
        share = 100.0 * _busy(made, r["device"], s, e, base) / d
        assert r["sm_active_pct"] == pytest.approx(share, abs=1e-4)
        assert r["sm_issue_pct"] == pytest.approx(0.6 * share, abs=1e-4)
        assert r["tensor_active_pct"] == pytest.approx(0.25 * share, abs=1e-4)
        assert (r["dram_read_pct"], r["dram_write_pct"], r["dram_pct"]) == (30, 12, 42)
        assert r["ncu_run"] is None and "no ncu run matched" in r["note"]
        levels.add(round(share))
    assert len(levels) > 3            # (iterations of different busy shares: not one value throughout)
    one = reports.run(mdb, "gpu_metric_levels", {"run": "m", "iteration": 2}).to_pylist()
    assert [(r["iteration"], r["device"]) for r in one] == [(2, 0), (2, 1)]


def test_an_export_without_gpu_metrics_loads_no_samples_and_says_nothing(mdb):
    assert mdb.execute("SELECT count(*) FROM gpu_metric_samples WHERE run = 'plain'").fetchone() == (0,)
    with pytest.raises(reports.ReportError, match="needs sampled GPU metrics .* none for run plain"):
        reports.run(mdb, "gpu_metric_levels", {"run": "plain"})
    assert NsysReader().notes(mdb, "x.sqlite", "plain") == []
    (meta,), = mdb.execute("SELECT metadata FROM runs WHERE run = 'plain'").fetchall()
    assert json.loads(meta)["nsys_gpu_metric_samples"] is None
    logged = [m for m, in mdb.execute("SELECT message FROM ingest_log WHERE run = 'plain'").fetchall()]
    assert logged and not [m for m in logged if "GPU metric" in m]
    # the same export's events and kernels, with the tables or without
    digest = """SELECT count(*), sum(hash(event_id, ph, cat, name, pid, tid, ts_ns, dur_ns, correlation,
                CAST(args AS VARCHAR))) FROM events WHERE run = ?"""
    assert mdb.execute(digest, ["m"]).fetchone() == mdb.execute(digest, ["plain"]).fetchone()


def test_the_ingest_says_what_was_loaded(made, mdb):
    n, = q(made, "SELECT count(*) FROM GPU_METRICS")[0]
    (meta,), = mdb.execute("SELECT metadata FROM runs WHERE run = 'm'").fetchall()
    assert json.loads(meta)["nsys_gpu_metric_samples"] == {"GPU_METRICS": n}
    notes = NsysReader().notes(mdb, "x.sqlite", "m")
    assert notes == [f"note: x.sqlite: {n} sampled GPU metric values loaded (6 metrics, GPU 0, 1): "
                     "report gpu_metric_levels"]
    logged = " ".join(m for m, in mdb.execute("SELECT message FROM ingest_log WHERE run = 'm'").fetchall())
    assert "not loaded" not in logged


def test_tables_found_by_columns_and_one_rank_keeps_its_gpu(made, tmp_path):
    """Renamed tables (a later nsys's names) are found by their columns; --rank 0 loads
    the samples of that process's GPU only."""
    p = tmp_path / "renamed.sqlite"
    p.write_bytes(Path(made).read_bytes())
    c = sqlite3.connect(p)
    c.execute("ALTER TABLE GPU_METRICS RENAME TO GPU_METRIC_SAMPLES_NEW")
    c.execute("ALTER TABLE TARGET_INFO_GPU_METRICS RENAME TO METRIC_DESCRIPTIONS_NEW")
    c.commit()
    c.close()
    con = db.connect(tmp_path / "r.duckdb")
    try:
        assert ingest_file(con, str(p), run="r0", options={"rank": 0}).status == "loaded"
        (dev,), = con.execute("SELECT DISTINCT device FROM kernels WHERE run = 'r0'").fetchall()
        want = q(made, "SELECT count(*), sum(value) FROM GPU_METRICS WHERE typeId & 255 = ?", (dev,))[0]
        got = con.execute("SELECT count(*), sum(value), count(DISTINCT device), count(DISTINCT metric) "
                          "FROM gpu_metric_samples WHERE run = 'r0'").fetchone()
        assert got == (want[0], float(want[1]), 1, 6) and want[0] > 0
    finally:
        con.close()


def test_ncu_levels_beside_the_sampled_ones_where_an_ncu_run_is_matched(made, tmp_path):
    """One rank's run paired with an ncu report of its steady iteration's kernels (an
    ncu CSV whose rows are a real report's, given the names, grids and blocks of those
    kernels): the report's ncu columns are utilization_levels' scaled levels of that
    iteration; iterations without matched kernels have none (and say so)."""
    import sys
    sys.path.insert(0, str(Path(__file__).parent))
    from conftest import AMP_NCU_BASE, read_ncu_csv, write_ncu_csv
    con = db.connect(tmp_path / "n.duckdb")
    try:
        ingest_file(con, made, run="r0", options={"rank": 0, "iterations_from": "FlashAttnFunc"})
        (steady,), = con.execute("SELECT iteration FROM iteration_steadiness WHERE run = 'r0' AND steady").fetchall()
        ks = con.execute("SELECT name, grid_x, grid_y, grid_z, block_x, block_y, block_z FROM kernels "
                         "WHERE run = 'r0' AND iteration = ? ORDER BY ts_ns", [steady]).fetchall()
        header, units, data = read_ncu_csv(AMP_NCU_BASE)
        ix = {c: i for i, c in enumerate(header)}
        rows = []
        for i, (name, gx, gy, gz, bx, by, bz) in enumerate(ks):
            r = list(data[i])
            r[ix["ID"]], r[ix["Kernel Name"]] = str(i), name
            r[ix["Grid Size"]], r[ix["Block Size"]] = f"({gx}, {gy}, {gz})", f"({bx}, {by}, {bz})"
            rows.append(r)
        ncu = ingest_file(con, write_ncu_csv(tmp_path / "ncu.csv.gz", header, units, rows), pair_with="r0")
        assert ks and ncu.status == "loaded"
        levels = {r["iteration"]: r for r in reports.run(con, "gpu_metric_levels", {"run": "r0"}).to_pylist()}
        (u,) = reports.run(con, "utilization_levels", {"run": "r0", "iteration": str(steady)}).to_pylist()
        got = levels[steady]
        assert u["matched_kernels"] == len(ks) and u["smsp_active_pct_iter"] is not None
        assert got["ncu_run"] == ncu.run and "ncu levels" in got["note"]
        assert (got["ncu_smsp_active_pct_iter"], got["ncu_issue_slot_pct_iter"], got["ncu_tc_active_pct_iter"]) == \
            (u["smsp_active_pct_iter"], u["issue_slot_pct_iter"], u["tc_active_pct_iter"])
        assert got["gpu_util_pct"] == u["gpu_util_pct"] and got["device"] == 0 and got["sm_active_pct"] > 0
        other = [r for i, r in levels.items() if i != steady]
        assert other and all(r["ncu_smsp_active_pct_iter"] is None and "ncu levels NULL: " in r["note"]
                             for r in other)
    finally:
        con.close()


@pytest.mark.parametrize("as_view", [False, True])
def test_values_of_another_type_and_a_view_read_as_sqlite_gives_them(made, tmp_path, as_view):
    """Fractions load as they are and text where a number belongs as NULL (the range is
    read row by row); a later-versioned view of the samples (no rowids) is streamed."""
    p = tmp_path / "odd.sqlite"
    p.write_bytes(Path(made).read_bytes())
    c = sqlite3.connect(p)
    c.execute("UPDATE GPU_METRICS SET value = value + 0.25 WHERE rowid % 7 = 0")
    c.execute("UPDATE GPU_METRICS SET value = 'n/a' WHERE rowid = 10")
    if as_view:
        c.execute("CREATE VIEW GPU_METRICS_V2 AS SELECT * FROM GPU_METRICS")
    c.commit()
    c.close()
    want = q(p, "SELECT count(*), sum(value) FILTER (WHERE typeof(value) <> 'text'), "
                "count(*) FILTER (WHERE typeof(value) = 'text') FROM GPU_METRICS")[0]
    con = db.connect(tmp_path / "o.duckdb")
    try:
        ingest_file(con, str(p), run="o")
        got = con.execute("SELECT count(*), sum(value), count(*) FILTER (WHERE value IS NULL) "
                          "FROM gpu_metric_samples WHERE run = 'o'").fetchone()
        assert got[0] == want[0] and got[1] == pytest.approx(want[1], rel=1e-12) and got[2] == want[2] == 1
        (meta,), = con.execute("SELECT metadata FROM runs WHERE run = 'o'").fetchall()
        assert json.loads(meta)["nsys_gpu_metric_samples"] == {("GPU_METRICS_V2" if as_view else "GPU_METRICS"): want[0]}
    finally:
        con.close()
