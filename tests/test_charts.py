"""Charts built from polars: the violin's densities against a kernel density computed
independently in plain Python, the queue chart's panels per run, a colour per layer
type, and the data going out as the report's rows (not through Altair's validation)."""
import math

import pytest

from tracedb.present import charts
from tracedb.store import db
from tracedb.query import reports
from tracedb.ingest import ingest_file

from conftest import AMP_NCU, AMP_TRACE, DATA, TF

AMP = "h100_resnet50_bs64_amp"


@pytest.fixture(scope="module")
def cdb(tmp_path_factory):
    con = db.connect(tmp_path_factory.mktemp("charts") / "c.duckdb")
    ingest_file(con, AMP_TRACE)
    ingest_file(con, AMP_NCU, pair_with=AMP)
    for p in TF:
        ingest_file(con, p)
    yield con
    con.close()


def kde(xs, ws, grid):
    """Weighted Gaussian KDE with Silverman's bandwidth on the weighted spread, by hand."""
    sw = sum(ws)
    mean = sum(w * x for x, w in zip(xs, ws)) / sw
    sd = math.sqrt(sum(w * (x - mean) ** 2 for x, w in zip(xs, ws)) / sw)
    n_eff = sw ** 2 / sum(w * w for w in ws)
    h = max(1.0, 1.06 * sd * n_eff ** -0.2)
    return mean, [sum(w * math.exp(-0.5 * ((g - x) / h) ** 2) for x, w in zip(xs, ws)) / (h * sw * math.sqrt(2 * math.pi))
                  for g in grid]


def test_violin_density_per_kernel_and_weighted_by_time(cdb):
    table = reports.run(cdb, "kernel_utilization", {"run": AMP})
    rows = [r for r in table.to_pylist() if r["issue_slot_pct"] is not None]
    grid = list(range(charts.GRID))
    for weight in (None, "dur_ns"):
        got = charts.density(charts._frame(table), "issue_slot_pct", weight).sort("pct")
        mean, dens = kde([r["issue_slot_pct"] for r in rows], [r[weight] if weight else 1.0 for r in rows], grid)
        assert got["pct"].to_list() == [float(g) for g in grid]
        assert got["density"].to_list() == pytest.approx(dens, rel=1e-9, abs=1e-12)
        assert got["mean"][0] == pytest.approx(mean)
        assert 0.9 < sum(dens) < 1.01          # a density over 0..100 in steps of 1
    spec = charts.build(cdb, "kernel_issue", {"run": AMP}).to_dict()
    assert {v["weighting"] for v in spec["data"]["values"]} == {"per kernel", "weighted by kernel time"}
    assert spec["facet"]["column"]["field"] == "run"


def test_queue_chart_has_a_panel_and_a_time_axis_per_run(cdb, tmp_path):
    fig = charts.build(cdb, "queue", {})
    spec = fig.to_dict()
    assert spec["facet"]["row"]["field"] == "run"
    assert spec["resolve"]["scale"]["x"] == "independent"
    rows = fig.rows()
    occ = reports.run(cdb, "queue_occupancy", {}).to_pylist()
    async_runs = {r["run"] for r in occ if r["ts_ns"] is not None}
    assert set(rows["run"].unique().to_list()) == async_runs and len(async_runs) >= 2
    line = rows.filter(rows["part"] == "line")
    assert len(line) == len([r for r in occ if r["ts_ns"] is not None])
    for run in async_runs:         # each run's time starts at 0 ms and ends at its own span
        ts = [r["ts_ns"] for r in occ if r["run"] == run and r["ts_ns"] is not None]
        ms = line.filter(line["run"] == run)["ms"]
        assert ms.min() == 0 and ms.max() == pytest.approx((max(ts) - min(ts)) / 1e6)
    charts.save(fig, tmp_path / "q.svg")
    assert "mark-line" in (tmp_path / "q.svg").read_text()


def test_layers_chart_gives_every_layer_type_its_own_colour(cdb, tmp_path):
    ops = [r[0] for r in cdb.execute("SELECT DISTINCT op_name FROM trace_kernels WHERE op_name IS NOT NULL "
                                     "ORDER BY 1 LIMIT 14").fetchall()]
    assert len(ops) == 14
    for i, op in enumerate(ops):       # 14 layer types of their own, and the shipped ones for the rest
        cdb.execute("INSERT INTO layer_rules VALUES (?, 'op', ?, ?, 'user')", [i, "^" + op + "$", f"type {i}"])
    try:
        fig = charts.build(cdb, "layers", {})
        types = set(fig.rows()["layer_type"].to_list())
        scale = fig.to_dict()["encoding"]["color"]["scale"]
        assert set(scale["domain"]) == types and len(types) > 14 and scale["scheme"] == "tableau20"
    finally:
        cdb.execute("DELETE FROM layer_rules WHERE source = 'user'")


def test_spec_carries_the_report_rows_as_polars_wrote_them(cdb):
    fig = charts.build(cdb, "tc_cdf", {"run": AMP})
    table = reports.run(cdb, "tc_issue_cdf", {"run": AMP}).to_pylist()
    text = fig.spec_json()
    assert text.count('"cum":') == len(table)
    assert fig.to_dict()["data"]["values"][0]["cum"] == table[0]["cum_time_share_pct"]
