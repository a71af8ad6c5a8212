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
from test_nsys_ingest import q          # sqlite3 rows of the file, read independently

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


def _copy(made, tmp_path, name, *statements):
    p = tmp_path / name
    p.write_bytes(Path(made).read_bytes())
    c = sqlite3.connect(p)
    for s in statements:
        c.execute(s)
    c.commit()
    c.close()
    return p


def _samples(con, run):
    return {(d, m): (n, s, lo, hi) for d, m, n, s, lo, hi in con.execute(
        "SELECT device, metric, count(*), sum(value), min(ts_ns), max(ts_ns) FROM gpu_metric_samples "
        "WHERE run = ? GROUP BY 1, 2", [run]).fetchall()}


def test_table_and_column_names_holding_quotes_read_as_the_original(made, mdb, tmp_path):
    """Tables and columns named with a double quote and `")--` (the samples' table
    renamed so that it is found by its columns, its metric ids described; an unrelated
    table of the same columns, whose metric ids are not, is not read): the samples and
    events are those of the unchanged file."""
    p = _copy(made, tmp_path, "quoted.sqlite",
              'ALTER TABLE GPU_METRICS RENAME TO "zz""samples"")--"',
              'ALTER TABLE "zz""samples"")--" ADD COLUMN "x""y" INTEGER',
              'ALTER TABLE TARGET_INFO_GPU_METRICS RENAME TO "d""escriptions"")--"',
              'CREATE TABLE "a""unrelated"")--" (typeId INTEGER, timestamp INTEGER, metricId INTEGER, '
              'value INTEGER, "q""c" TEXT)',
              'INSERT INTO "a""unrelated"")--" VALUES (4096, 5, 999, 7, \'x\')')
    con = db.connect(tmp_path / "q.duckdb")
    try:
        assert ingest_file(con, str(p), run="q", options={"iterations_from": "FlashAttnFunc"}).status == "loaded"
        assert _samples(con, "q") == _samples(mdb, "m") and len(_samples(con, "q")) == 12
        (meta,), = con.execute("SELECT metadata FROM runs WHERE run = 'q'").fetchall()
        n, = q(made, "SELECT count(*) FROM GPU_METRICS")[0]
        assert json.loads(meta)["nsys_gpu_metric_samples"] == {'zz"samples")--': n}
        digest = """SELECT count(*), sum(hash(event_id, ph, cat, name, pid, tid, ts_ns, dur_ns, correlation,
                    CAST(args AS VARCHAR))) FROM events WHERE run = ?"""
        assert con.execute(digest, ["q"]).fetchone() == mdb.execute(digest, ["m"]).fetchone()
    finally:
        con.close()


def test_a_samples_table_sqlite_cannot_read_is_refused_in_one_line(made, tmp_path):
    from tracedb.ingest.errors import IngestError
    p = _copy(made, tmp_path, "broken.sqlite",
              'CREATE TABLE "t""mp" (typeId INTEGER, timestamp INTEGER, metricId INTEGER, value INTEGER)',
              'CREATE VIEW GPU_METRICS_V9 AS SELECT * FROM "t""mp"', 'DROP TABLE "t""mp"')
    con = db.connect(tmp_path / "b.duckdb")
    try:
        with pytest.raises(IngestError) as e:
            ingest_file(con, str(p), run="b")
        assert str(p) in str(e.value) and "\n" not in str(e.value) and "no such table" in str(e.value)
    finally:
        con.close()


def test_samples_of_gpus_no_kernel_ran_on_are_noted(made, mdb, tmp_path):
    """typeIds naming GPUs 4 and 5 while the kernels ran on 0 and 1: the ingest says
    so; for --rank 0, that none of the file's samples were kept. The unchanged file
    (its GPUs those of the kernels) says nothing of it."""
    p = _copy(made, tmp_path, "other_gpus.sqlite", "UPDATE GPU_METRICS SET typeId = typeId + 4",
              "UPDATE TARGET_INFO_GPU_METRICS SET typeId = typeId + 4")
    n, = q(made, "SELECT count(*) FROM GPU_METRICS")[0]
    con = db.connect(tmp_path / "g.duckdb")
    try:
        r = ingest_file(con, str(p), run="g")
        said = [w for w in r.warnings if "may number the GPUs otherwise" in w]
        assert len(said) == 1 and "are of GPU 4, 5 and the kernels ran on GPU 0, 1" in said[0]
        assert con.execute("SELECT count(*) FROM gpu_metric_samples WHERE run = 'g'").fetchone() == (n,)
        r = ingest_file(con, str(p), run="g0", options={"rank": 0})
        said = [w for w in r.warnings if "may number the GPUs otherwise" in w]
        assert len(said) == 1 and f"none of the file's {n} sampled GPU metric values" in said[0]
        assert con.execute("SELECT count(*) FROM gpu_metric_samples WHERE run = 'g0'").fetchone() == (0,)
    finally:
        con.close()
    logged = [m for m, in mdb.execute("SELECT message FROM ingest_log WHERE run = 'm'").fetchall()]
    assert logged and not [m for m in logged if "may number the GPUs" in m]


def test_names_of_a_sample_s_own_type_id_before_those_without_one(made, mdb, tmp_path):
    """A names table mixing typeIds and NULL ones (and a NULL metric id): a sample is
    named once, by its own typeId's row where there is one (no duplicates), else by
    the row without a typeId."""
    p = _copy(made, tmp_path, "mixed.sqlite",
              "CREATE TABLE TARGET_INFO_GPU_METRICS_V2 (typeId INTEGER, sourceId INTEGER, typeName TEXT, "
              "metricId INTEGER, metricName TEXT)",
              "INSERT INTO TARGET_INFO_GPU_METRICS_V2 SELECT * FROM TARGET_INFO_GPU_METRICS",
              "INSERT INTO TARGET_INFO_GPU_METRICS_V2 VALUES (NULL, 0, 'GH100', 0, 'Not this [Throughput %]'), "
              "(NULL, 0, 'GH100', 42, 'Untyped [MHz]'), (NULL, 0, 'GH100', NULL, 'No id')",
              "INSERT INTO GPU_METRICS SELECT typeId, timestamp, 42, 7 FROM GPU_METRICS WHERE metricId = 3")
    extra, = q(p, "SELECT count(*) FROM GPU_METRICS WHERE metricId = 42")[0]
    con = db.connect(tmp_path / "x.duckdb")
    try:
        ingest_file(con, str(p), run="x")
        got = _samples(con, "x")
        untyped = {k: v for k, v in got.items() if k[1] == "Untyped [MHz]"}
        assert {k: v for k, v in got.items() if k[1] != "Untyped [MHz]"} == _samples(mdb, "m")
        assert sum(v[0] for v in untyped.values()) == extra > 0 and {v[1] for v in untyped.values()} == \
            {7.0 * v[0] for v in untyped.values()}
    finally:
        con.close()


@pytest.mark.parametrize("differ", [True, False])
def test_cuda_devices_numbered_otherwise_than_nsys_gpus_are_noted(made, tmp_path, differ):
    """TARGET_INFO_CUDA_DEVICE mapping nsys's GPUs 2, 3 to CUDA devices 0, 1: the
    ingest says the samples' GPU may be misnamed; the table with equal ids says nothing."""
    g = 2 if differ else 0
    p = _copy(made, tmp_path, "cuda_dev.sqlite", "CREATE TABLE TARGET_INFO_CUDA_DEVICE (gpuId INTEGER, cudaId INTEGER, "
              "pid INTEGER)", f"INSERT INTO TARGET_INFO_CUDA_DEVICE VALUES ({g}, 0, 144), ({g + 1}, 1, 145)")
    con = db.connect(tmp_path / "c.duckdb")
    try:
        said = [w for w in ingest_file(con, str(p), run="c").warnings if "TARGET_INFO_CUDA_DEVICE" in w]
        assert said == (["TARGET_INFO_CUDA_DEVICE numbers GPU 2 as CUDA device 0, 3 as CUDA device 1: the "
                         "sampled GPU metrics' GPU (typeId & 0xFF) is taken as the kernels' CUDA device, which is "
                         "not verified; their GPUs may be misnamed"] if differ else [])
    finally:
        con.close()


def test_two_names_of_one_level_use_one_by_preference(made, mdb, tmp_path):
    """`SM Active` (50) beside `SMs Active`, `Tensor Active / FP16 Active` (80) beside
    `Tensor Active`, on the same period: the levels are those of the file without
    them (the preferred names), not sums, and the note names what was left out."""
    grid = "SELECT DISTINCT typeId, timestamp FROM GPU_METRICS WHERE metricId = 3"
    p = _copy(made, tmp_path, "two_names.sqlite",
              "INSERT INTO TARGET_INFO_GPU_METRICS SELECT DISTINCT typeId, sourceId, typeName, 10, "
              "'SM Active [Throughput %]' FROM TARGET_INFO_GPU_METRICS",
              "INSERT INTO TARGET_INFO_GPU_METRICS SELECT DISTINCT typeId, sourceId, typeName, 11, "
              "'Tensor Active / FP16 Active [Throughput %]' FROM TARGET_INFO_GPU_METRICS",
              f"INSERT INTO GPU_METRICS SELECT typeId, timestamp, 10, 50 FROM ({grid})",
              f"INSERT INTO GPU_METRICS SELECT typeId, timestamp, 11, 80 FROM ({grid})")
    con = db.connect(tmp_path / "t.duckdb")
    cols = ["iteration", "device", "covered_pct", "sm_active_pct", "sm_issue_pct", "tensor_active_pct", "dram_pct"]
    try:
        ingest_file(con, str(p), run="m", options={"iterations_from": "FlashAttnFunc"})
        got = reports.run(con, "gpu_metric_levels", {"run": "m"}).to_pylist()
        want = reports.run(mdb, "gpu_metric_levels", {"run": "m"}).to_pylist()
        assert [[r[c] for c in cols] for r in got] == [[r[c] for c in cols] for r in want] and got
        assert all(r["covered_pct"] == 100 for r in got)
        assert all("sm_active_pct from `SMs Active [Throughput %]`, not `SM Active [Throughput %]`" in r["note"]
                   and "tensor_active_pct from `Tensor Active [Throughput %]`, not "
                       "`Tensor Active / FP16 Active [Throughput %]`" in r["note"] for r in got)
        assert not [r for r in want if "one metric per level" in r["note"]]
    finally:
        con.close()


def test_a_gap_in_the_samples_counts_as_not_covered(made, mdb, tmp_path):
    """Samples of 2 ms removed: the sample before the gap covers at most 2 periods
    (100 us, the DRAM series' median interval) after it; covered_pct equals the
    iterations' overlap with the SMs Active intervals so capped (each from its
    sample's timestamp to the next's, the last one period), computed from the file
    with sqlite3 (an iteration wholly inside the uncovered part would have no row)."""
    base = q(made, "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME")[0][0]
    (start, dur), = mdb.execute("SELECT start_ns, dur_ns FROM iterations WHERE run = 'm' "
                                "ORDER BY dur_ns DESC, iteration LIMIT 1").fetchall()
    assert dur > 4_000_000
    a = start - base + dur // 2          # (from the middle of the longest iteration on: inside it)
    p = _copy(made, tmp_path, "gap.sqlite", f"DELETE FROM GPU_METRICS WHERE timestamp > {a} AND timestamp < {a + 2_000_000}")
    dram = [t for t, in q(p, "SELECT timestamp FROM GPU_METRICS WHERE typeId = 4096 AND metricId = 3 ORDER BY 1")]
    gaps = sorted(b - a_ for a_, b in zip(dram, dram[1:]))
    period = gaps[len(gaps) // 2]
    assert period == 100_000 and gaps[-1] > 1_900_000
    con = db.connect(tmp_path / "gap.duckdb")
    try:
        ingest_file(con, str(p), run="m", options={"iterations_from": "FlashAttnFunc"})
        its = {i: (s, e, d) for i, s, e, d in con.execute(
            "SELECT iteration, start_ns, end_ns, dur_ns FROM iterations WHERE run = 'm'").fetchall()}
        got = {(r["iteration"], r["device"]): r["covered_pct"]
               for r in reports.run(con, "gpu_metric_levels", {"run": "m"}).to_pylist()}
        want = {}
        for dev in (0, 1):
            ts = [t + base for t, in q(p, "SELECT timestamp FROM GPU_METRICS WHERE typeId = ? AND metricId = 0 "
                                          "ORDER BY 1", (4096 + dev,))]
            spans = [(t, min(nxt, t + 2 * period)) for t, nxt in zip(ts, ts[1:])] + [(ts[-1], ts[-1] + period)]
            for i, (s, e, d) in its.items():
                cov = sum(max(0, min(t, e) - max(f, s)) for f, t in spans)
                if cov:
                    want[(i, dev)] = round(100.0 * cov / d, 2)
        assert got == want
        assert [v for v in want.values() if 0 < v < 100] and [v for v in want.values() if v == 100]
    finally:
        con.close()


def _held(samples, period):
    """(from, to, value) of each (timestamp, value) of one GPU and metric, in time order,
    by NVIDIA's convention (gpu_metric_util_map): a value holds from its own timestamp to
    the next sample's, at most 2 periods; the last one holds one period."""
    ends = [t for t, _ in samples[1:]] + [None]
    return [(t, min(t + period if e is None else e, t + 2 * period), v) for (t, v), e in zip(samples, ends)]


def _held_back(samples, period):
    """The reading this replaced: a value held back to the previous sample, at most 2 periods."""
    return [(max(p, t - 2 * period), t, v) for (p, _), (t, v) in zip(samples, samples[1:])]


def _mean(spans, lo, hi):
    """(ns of [lo, hi) the spans cover, their time-weighted mean value there)."""
    parts = [(max(0, min(b, hi) - max(a, lo)), v) for a, b, v in spans]
    cov = sum(n for n, _ in parts)
    return cov, (sum(n * v for n, v in parts) / cov if cov else None)


def test_a_sample_holds_from_its_own_timestamp_to_the_next(made, mdb, tmp_path):
    """GPU 0's SMs Active made 0 before the first sample inside an iteration and 100
    from it on (a step at the iteration's start): by NVIDIA's convention the sample
    before the step describes the iteration's first part, so its level is 100 x the
    share of it from the step on; every iteration ending before the step reads 0 and
    every one starting after it 100. Expected from the file's samples in Python, in
    closed form and with _held; holding a value back to the previous sample (the
    reading this replaced) would give 100 for that iteration, which the test checks
    it does not. GPU 1 and GPU 0's other levels are those of the unchanged file."""
    base = q(made, "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME")[0][0]
    its = {i: (s, e, d) for i, s, e, d in mdb.execute(
        "SELECT iteration, start_ns, end_ns, dur_ns FROM iterations WHERE run = 'm'").fetchall()}
    ts = [t + base for t, in q(made, "SELECT timestamp FROM GPU_METRICS WHERE typeId = 4096 AND metricId = 0 "
                                     "ORDER BY 1")]
    # the iteration whose first part before its first sample is the largest share of it
    it, x = max(((i, min(t for t in ts if t > s)) for i, (s, e, d) in its.items()),
                key=lambda c: (c[1] - its[c[0]][0]) / its[c[0]][2])
    s_it, e_it, d_it = its[it]
    p = _copy(made, tmp_path, "step.sqlite", f"UPDATE GPU_METRICS SET value = CASE WHEN timestamp >= {x - base} "
              "THEN 100 ELSE 0 END WHERE typeId = 4096 AND metricId = 0")
    samples = [(t + base, v) for t, v in q(p, "SELECT timestamp, value FROM GPU_METRICS WHERE typeId = 4096 "
                                              "AND metricId = 0 ORDER BY 1")]
    con = db.connect(tmp_path / "step.duckdb")
    try:
        ingest_file(con, str(p), run="m", options={"iterations_from": "FlashAttnFunc"})
        got = {(r["iteration"], r["device"]): r for r in reports.run(con, "gpu_metric_levels", {"run": "m"}).to_pylist()}
    finally:
        con.close()
    before = {(r["iteration"], r["device"]): r for r in reports.run(mdb, "gpu_metric_levels", {"run": "m"}).to_pylist()}
    assert got.keys() == before.keys() == {(i, d) for i in its for d in (0, 1)}
    for i, (s, e, d) in its.items():
        want = 100.0 * max(0, e - max(s, x)) / d                  # closed form: the share of [s, e) from x on
        cov, mean = _mean(_held(samples, 100_000), s, e)
        assert cov == d and mean == pytest.approx(want, abs=1e-9)
        assert got[(i, 0)]["sm_active_pct"] == pytest.approx(want, abs=1e-4), i
        assert got[(i, 0)]["covered_pct"] == 100
        for c in ("sm_issue_pct", "tensor_active_pct", "dram_pct"):
            assert got[(i, 0)][c] == before[(i, 0)][c]
        assert got[(i, 1)] == before[(i, 1)]
    _, back = _mean(_held_back(samples, 100_000), s_it, e_it)
    assert back == 100 and got[(it, 0)]["sm_active_pct"] < 95      # the two readings differ here
    assert {round(got[(i, 0)]["sm_active_pct"]) for i in its} >= {0, 100}


def test_the_last_sample_holds_one_sampling_period(made, mdb, tmp_path):
    """GPU 1's samples cut in the middle of the longest iteration: the last sample of
    each metric holds one period (100 us), so that iteration's covered_pct is its
    share up to the last SMs Active sample + 100 us, and iterations starting later
    have no row of GPU 1; expected from the cut file's samples with _held. GPU 0's rows
    are those of the unchanged file."""
    base = q(made, "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME")[0][0]
    its = {i: (s, e, d) for i, s, e, d in mdb.execute(
        "SELECT iteration, start_ns, end_ns, dur_ns FROM iterations WHERE run = 'm'").fetchall()}
    it = max(its, key=lambda i: (its[i][2], -i))
    s_it, e_it, d_it = its[it]
    p = _copy(made, tmp_path, "cut.sqlite", f"DELETE FROM GPU_METRICS WHERE typeId = 4097 "
                                            f"AND timestamp > {s_it - base + d_it // 2}")
    samples = [(t + base, v) for t, v in q(p, "SELECT timestamp, value FROM GPU_METRICS WHERE typeId = 4097 "
                                              "AND metricId = 0 ORDER BY 1")]
    last = samples[-1][0]
    assert s_it < last < last + 100_000 < e_it
    spans = _held(samples, 100_000)
    want = {}
    for i, (s, e, d) in its.items():
        cov, mean = _mean(spans, s, e)
        if cov:
            want[i] = (round(100.0 * cov / d, 2), round(mean, 4))
    con = db.connect(tmp_path / "cut.duckdb")
    try:
        ingest_file(con, str(p), run="m", options={"iterations_from": "FlashAttnFunc"})
        rows = reports.run(con, "gpu_metric_levels", {"run": "m"}).to_pylist()
    finally:
        con.close()
    got = {r["iteration"]: (r["covered_pct"], r["sm_active_pct"]) for r in rows if r["device"] == 1}
    assert got == want
    assert want[it][0] == round(100.0 * (last + 100_000 - s_it) / d_it, 2) < 99
    assert [i for i in its if i not in want]                      # iterations after the cut: no row
    assert [r for r in rows if r["iteration"] == it and r["device"] == 1][0]["dram_pct"] == 42
    before = [r for r in reports.run(mdb, "gpu_metric_levels", {"run": "m"}).to_pylist() if r["device"] == 0]
    assert [r for r in rows if r["device"] == 0] == before


def test_the_maker_refuses_to_write_over_its_source(tmp_path):
    src = tmp_path / "src.sqlite"
    src.write_bytes(b"SQLite format 3\x00 not touched")
    (tmp_path / "sub").mkdir()
    for out in (src, tmp_path / "sub" / ".." / "src.sqlite"):
        with pytest.raises(ValueError, match="the output is the source export itself"):
            _maker().make(str(out), str(src))
    assert src.read_bytes() == b"SQLite format 3\x00 not touched"
