"""tracedb diff: changes and noise checked against the raw JSON, verdicts and the
exit code of the gate on real runs (fp32 vs amp ResNet-50 on the H100, the slow
vs the fixed DataLoader set-up, a run against itself)."""
import statistics

import pytest

import independent as ref
from conftest import DATA, raw_trace
from tracedb import cli
from tracedb.store import db
from tracedb.analysis import diff
from tracedb.query import reports
from tracedb.ingest import ingest_file

AMP, FP32 = "h100_resnet50_bs64_amp", "h100_resnet50_bs64_fp32"
SLOW, FIXED = "loader_slow", "loader_fixed"
PATHS = {AMP: DATA / "torch" / f"{AMP}.json.gz", FP32: DATA / "torch" / f"{FP32}.json.gz",
         SLOW: DATA / "torch_loader" / "loader_slow.json.gz", FIXED: DATA / "torch_loader" / "loader_fixed.json.gz"}


@pytest.fixture(scope="module")
def ddb(tmp_path_factory):
    path = tmp_path_factory.mktemp("diff") / "d.duckdb"
    con = db.connect(path)
    for run, p in PATHS.items():
        ingest_file(con, p)
        if run in (AMP, FP32):
            ingest_file(con, DATA / "power" / f"{run}.csv", pair_with=run)
    con.close()
    con = db.connect(path, read_only=True)
    yield con, path
    con.close()


def by_metric(rows):
    return {r["metric"]: r for r in rows}


def rel_sd(values):
    return 100 * statistics.stdev(values) / statistics.fmean(values)


def test_fp32_vs_amp_is_worse_and_the_gate_fails(ddb, capsys):
    con, path = ddb
    rows = by_metric(diff.compare(con, FP32, AMP))
    u32, uamp = ref.utilization(raw_trace(PATHS[FP32])), ref.utilization(raw_trace(PATHS[AMP]))
    (s32,), (samp,) = u32.values(), uamp.values()           # one profiled step each
    it = rows["iteration_time"]
    assert (it["base"], it["new"]) == (s32["total_ns"], samp["total_ns"])
    assert it["delta_pct"] == pytest.approx(100 * (samp["total_ns"] - s32["total_ns"]) / s32["total_ns"], abs=1e-3)
    # a single iteration per run: no measured noise, the stated floor stands in
    assert it["noise_source"] == "floor" and it["noise_pct"] == diff.NOISE_FLOOR_PCT
    assert it["verdict"] == "worse"                           # amp ResNet-50 is 9.5% slower here (host-bound)
    assert rows["gpu_util"]["verdict"] == "worse"
    assert rows["energy_per_iteration"]["verdict"] == "worse"
    # MFU as flop_utilization gives it (analytic FLOPs of the record_shapes traces)
    mfu = {r: reports.run(con, "flop_utilization", {"run": r}).to_pylist() for r in (FP32, AMP)}
    mfu = {r: next(x["mfu_pct"] for x in v if x["source"] == "analytic") for r, v in mfu.items()}
    assert (rows["mfu"]["base"], rows["mfu"]["new"]) == pytest.approx((mfu[FP32], mfu[AMP]))
    assert rows["mfu"]["verdict"] == "worse"                  # amp is measured against the fp16 peak
    assert rows["smsp_active_pct"]["verdict"] == "n/a"       # no ncu report for either run here
    kernels = [r for r in rows.values() if r["metric"].startswith("kernel: ")]
    assert kernels and all(r["verdict"] == "n/a" for r in kernels)   # fp32 and fp16 kernels differ by name
    assert cli.main(["diff", "--db", str(path), FP32, AMP, "--format", "csv"]) == 1
    assert "WORSE beyond 5%" in capsys.readouterr().err
    # a threshold above every change: the gate passes
    assert cli.main(["diff", "--db", str(path), FP32, AMP, "--threshold", "95", "--format", "csv"]) == 0


def test_noise_from_the_runs_iterations(ddb):
    con, _ = ddb
    rows = by_metric(diff.compare(con, SLOW, FIXED, batch_size=64))
    us, uf = ref.utilization(raw_trace(PATHS[SLOW])), ref.utilization(raw_trace(PATHS[FIXED]))
    assert len(us) == len(uf) == 4
    it = rows["iteration_time"]
    noise = (rel_sd([v["total_ns"] for v in us.values()]) ** 2 + rel_sd([v["total_ns"] for v in uf.values()]) ** 2) ** .5
    assert it["noise_source"] == "iterations" and it["noise_pct"] == pytest.approx(noise, abs=1e-3)
    assert it["verdict"] == "better" and it["delta_pct"] < -50   # 4 loader workers: a 4x shorter step
    k = rows[next(m for m in rows if m.startswith("kernel: ") and rows[m]["base"] and rows[m]["new"])]
    assert k["noise_source"] == "launches"


def test_a_run_against_itself_is_unchanged(ddb):
    con, path = ddb
    rows = diff.compare(con, FIXED, FIXED)
    assert {r["verdict"] for r in rows} <= {"unchanged", "n/a"}
    assert all(r["delta_pct"] == 0 for r in rows if r["verdict"] == "unchanged")
    assert by_metric(rows)["iteration_time"]["noise_source"] == "iterations"
    assert cli.main(["diff", "--db", str(path), AMP, AMP, "--format", "csv"]) == 0


def test_gate_errors_exit_2(ddb, capsys):
    _, path = ddb
    assert cli.main(["diff", "--db", str(path), AMP, "nope"]) == 2
    err = capsys.readouterr().err
    assert "no run named 'nope'" in err and "Traceback" not in err
