"""cuda_bench on CPU: sweep planning, the parsing of the benchmark's raw output,
points and fits, and checks on the real H200 results committed under
cuda_bench/results/. The CUDA source is compiled only where nvcc exists."""
import csv
import json
import shutil
from pathlib import Path

import pytest

from tracedb.query import reports
from tracedb.cuda_bench import plan, results
from tracedb.ingest import ingest_file

RES = Path(__file__).resolve().parent.parent / "cuda_bench" / "results" / "nvidia_h200"


def test_plan_covers_levels_shapes_counts_and_pairs():
    sizes = {"shared": 48 << 10, "l1": 128 << 10, "l2": 4 << 20, "dram": 4 << 30}
    probe = {(l, t, b): 2e6 for l in plan.LEVELS for t, b in plan.shapes(132)}
    pts = plan.sweep(sizes, 132, probe, target_s=0.1, repeats=2)
    assert len(pts) == 4 * 8 * len(plan.MEAS_MULTS) * 2 * 2
    assert {p.tpb for p in pts} == {1, 32, 256, 1024} and {p.blocks for p in pts} == {1, 132}
    warm = {(p.level, p.tpb, p.blocks, p.repeat) for p in pts if p.meas_steps == 0}
    both = {(p.level, p.tpb, p.blocks, p.repeat) for p in pts if p.meas_steps > 0}
    assert warm == both                                  # every measured run has its warm-up-only twin
    assert all(p.launches == 50 for p in pts)           # 0.1 s / 2 ms
    assert pts != sorted(pts, key=lambda p: p.line())   # shuffled against drift
    # DRAM: threads walk disjoint stretches and move on every launch; L1 warms each ring
    for p in pts:
        if p.level == "dram" and p.meas_steps:
            assert p.tpb * p.blocks * p.spacing <= sizes["dram"] // 8 + p.spacing
            assert p.meas_steps * plan.STRIDE_ELEMS <= p.spacing
            assert p.advance >= p.meas_steps * plan.STRIDE_ELEMS
        if p.level == "l1":
            assert p.warm_steps == plan.ring_steps(sizes["l1"])
        if p.level in ("l2", "dram", "shared"):
            assert p.warm_steps == 0
    assert plan.estimate_seconds(pts, probe) < 600


def committed_probe_ns(res=RES):
    """One launch's time per level and shape at its largest access count and
    warm-up only (probe_ns of plan.estimate_seconds), from a committed sweep."""
    raw = results.read_raw((res / "raw_sweep.csv").read_text())
    top = {}
    for r in raw:
        k = (r["level"], r["threads_per_block"], r["blocks"])
        if r["meas_steps"] == 0:
            top[k + (0,)] = (0, r["kernel_ns"] / r["launches"])
        elif r["meas_steps"] >= top.get(k, (0, 0))[0]:
            top[k] = (r["meas_steps"], r["kernel_ns"] / r["launches"])
    return {k: ns for k, (_, ns) in top.items()}


def test_sweep_sized_to_the_gpu_time_budget():
    meta = json.loads((RES / "run.json").read_text())
    probe = committed_probe_ns()
    pts, target, est = plan.sweep_within(400, meta["sizes"], meta["sms"], probe, target_s=0.25, repeats=3)
    assert target == 0.25 and est <= 400                       # the default sweep fits as designed
    assert len(pts) == 4 * 8 * len(plan.MEAS_MULTS) * 3 * 2 and {p.repeat // 10 for p in pts} == {0, 1, 2}
    small, t_small, est_small = plan.sweep_within(120, meta["sizes"], meta["sms"], probe, 0.25, 3)
    assert t_small < 0.25 and est_small <= 120 and len(small) == len(pts)   # runs shorten; repeats stay
    assert min(p.launches for p in small) >= 1
    longer = plan.estimate_seconds(pts, probe)
    assert longer > plan.estimate_seconds(small, probe) + len(pts) * 0.01


def test_the_committed_calibration_kept_its_budget():
    meta = json.loads((RES / "run.json").read_text())
    assert meta["gpu_seconds"] <= 600                            # identification, sweep, checks, LOAD+DIV
    assert {p // 10 for p in {r["repeat"] for r in results.read_raw((RES / "raw_sweep.csv").read_text())}} == {0, 1, 2}
    # the planner's estimate of the sweep came within 25% of the sweep's real time
    assert meta["sweep_estimate_s"] == pytest.approx(meta["sweep_seconds"], rel=0.25)


def test_every_committed_run_keeps_the_order_of_levels():
    """The committed run and the earlier ones (earlier/): shared <= L1 < L2 < DRAM in
    each, and on the committed run's machine DRAM and L2 repeat within 3%."""
    runs = {d.name: {r["level"]: float(r["eps_pj"]) for r in csv.DictReader(open(d / "fits.csv"))
                     if r["lower_bound"] == "True"} for d in [RES, *sorted((RES / "earlier").iterdir())]}
    assert len(runs) == 5
    for name, eps in runs.items():
        order = [eps[l] for l in ("shared", "l1", "l2", "dram") if l in eps]
        assert order == sorted(order), name
    same = [runs[RES.name], runs["t0232"], runs["t0242_dram_shared"]]
    assert max(r["dram"] for r in same) / min(r["dram"] for r in same) < 1.03
    assert runs["t0232"]["l2"] == pytest.approx(runs[RES.name]["l2"], rel=0.03)


def test_sizes_chosen_from_hit_rates():
    ident = list(csv.DictReader(open(RES / "identification.csv")))
    rate = lambda lvl: {int(r["array_bytes"]): float(r["hit_rate_pct"]) for r in ident if r["level"] == lvl}
    assert plan.choose_size("l1", rate("l1")) == 128 << 10          # 256 KiB misses: half of it
    assert plan.choose_size("l2", rate("l2")) == 4 << 20
    with pytest.raises(ValueError, match="no size stays in l2"):
        plan.choose_size("l2", {64 << 20: 34.0})
    assert json.loads((RES / "run.json").read_text())["sizes"] == {
        "shared": 49152, "l1": 131072, "l2": 4194304, "dram": 4294967296}


def test_checks():
    ok = results.check("dram", {"dram__sectors_read.sum": 1000, "lts__t_sectors_op_read.sum": 1500}, 1, 10, 100)
    assert ok["valid"] and ok["hit_rate_pct"] == 100
    off = results.check("l1", {"l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": 800,
                               "l1tex__t_sectors_pipe_lsu_mem_global_op_ld_lookup_hit.sum": 800}, 1, 10, 100)
    assert not off["valid"] and "sector count off" in off["note"]
    miss = results.check("l2", {"lts__t_sectors_op_read.sum": 1300, "dram__sectors_read.sum": 500}, 1, 10, 100)
    assert not miss["valid"] and miss["hit_rate_pct"] == 50
    chk = {(r["level"], int(r["threads_per_block"]), int(r["blocks"])): r for r in csv.DictReader(open(RES / "checks.csv"))}
    assert len(chk) == 4 * len(plan.shapes(132))                             # every shape of the sweep
    assert chk[("l2", 32, 1)]["valid"] == "False" and float(chk[("l2", 32, 1)]["hit_rate_pct"]) == pytest.approx(50, abs=0.01)   # one SM: half from DRAM
    assert chk[("l2", 1024, 132)]["valid"] == "True"
    assert all(r["valid"] == "True" for k, r in chk.items() if k[0] != "l2")
    # shared memory: one wavefront per load with one thread, a quarter from 32 threads up
    ratio = {k: float(r["counted"]) / float(r["expected"]) for k, r in chk.items() if k[0] == "shared"}
    assert all(v == (1.0 if k[1] == 1 else 0.25) for k, v in ratio.items())


def test_points_from_the_committed_raw_output():
    raw = results.read_raw((RES / "raw_sweep.csv").read_text())
    meta = json.loads((RES / "run.json").read_text())
    idle = sum(meta["idle_power_w"].values()) / 2
    checks = results.checks_from_rows(list(csv.DictReader(open(RES / "checks.csv"))))
    pts = results.points(raw, idle, checks)
    assert len(pts) == sum(r["meas_steps"] > 0 for r in raw) == len(raw) // 2
    committed = list(csv.DictReader(open(RES / "points.csv")))
    assert len(committed) == len(pts)
    for p, c in zip(pts, committed):
        assert p["accesses"] == int(c["accesses"]) and p["energy_j"] == pytest.approx(float(c["energy_j"]))
        assert str(p["valid"]) == c["valid"]
    # one point by hand: dynamic energy of the measured run minus that of its warm-up twin
    r = next(x for x in raw if x["level"] == "dram" and x["meas_steps"] and x["blocks"] == 132 and x["threads_per_block"] == 1024)
    w = next(x for x in raw if x["meas_steps"] == 0 and all(x[k] == r[k] for k in ("level", "threads_per_block", "blocks", "launches", "repeat")))
    e = ((r["energy_mj"] - idle * r["window_ns"] / 1e6) - (w["energy_mj"] - idle * w["window_ns"] / 1e6)) / 1e3
    p = next(x for x in pts if x["level"] == "dram" and x["blocks"] == 132 and x["threads_per_block"] == 1024
             and x["repeat"] == r["repeat"])
    assert p["energy_j"] == pytest.approx(e) and p["accesses"] == r["launches"] * 132 * 1024 * r["meas_steps"]


def test_fits_of_the_real_h200_calibration(fresh_db):
    ingest_file(fresh_db, RES / "points.csv")
    fits = {r["level"]: r for r in reports.run(fresh_db, "calibration_fit", {"gpu": "NVIDIA H200"}).to_pylist()
            if r["lower_bound"]}
    assert set(fits) == {"shared", "l1", "l2", "dram"}
    eps = [fits[l]["eps_pj"] for l in ("shared", "l1", "l2", "dram")]
    assert eps == sorted(eps) and eps[0] < eps[1] < eps[2] < eps[3]       # shared <= L1 < L2 < DRAM
    assert all(fits[l]["r2"] >= 0.95 for l in fits)
    assert all(fits[l]["blocks"] == 132 for l in fits)                    # the larger launch shapes
    committed = {r["level"]: float(r["eps_pj"]) for r in csv.DictReader(open(RES / "fits.csv")) if r["lower_bound"] == "True"}
    assert set(fits) == set(committed)
    assert all(fits[l]["eps_pj"] == pytest.approx(committed[l], abs=0.01) for l in fits)


def test_app_breakdown_from_the_committed_captures(fresh_db):
    app = RES / "app"
    ingest_file(fresh_db, app / "trace.json.gz", run="resnet50_bs64_amp")
    ingest_file(fresh_db, app / "power.csv.gz", pair_with="resnet50_bs64_amp")
    ingest_file(fresh_db, app / "ncu_raw.csv.gz", pair_with="resnet50_bs64_amp")
    ingest_file(fresh_db, RES / "points.csv")
    t = {r["component"]: r for r in reports.run(fresh_db, "energy_breakdown", {"run": "resnet50_bs64_amp"}).to_pylist()}
    committed = {r["component"]: r for r in csv.DictReader(open(app / "energy_breakdown.csv"))}
    for c, r in t.items():
        assert r["energy_j"] == pytest.approx(float(committed[c]["energy_j"]))
    mem = sum(t[c]["energy_j"] for c in ("shared", "l1", "l2", "dram"))
    dyn = t["total"]["energy_j"] - t["static"]["energy_j"]
    assert 0.6 <= mem / dyn <= 0.84            # data movement share of dynamic energy (published 60-84%)
    assert t["dram"]["energy_j"] > 0.7 * mem


def test_cuda_source_compiles(tmp_path, monkeypatch):
    from tracedb.cuda_bench import build
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not installed")
    if not build.has_nvml_header():
        pytest.skip("this CUDA toolkit has no nvml.h (NVML headers); the GPU machine's has")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert build.binary("sm_90").exists()


def test_div_cross_check_from_the_committed_raw_output():
    raw = results.read_raw((RES / "div_check_raw.csv").read_text())
    summary = json.loads((RES / "div_check.json").read_text())
    dp = results.div_points(raw, summary["idle_power_w"])
    load, r2l = results.slope([p for p in dp if not p["div"]])
    both, r2d = results.slope([p for p in dp if p["div"]])
    assert load * 1e12 == pytest.approx(summary["load_pj_per_access"])
    assert (both - load) * 1e9 == pytest.approx(summary["div_nj_per_thread_op"])
    assert r2l > 0.99 and r2d > 0.99 and 0.2 < summary["div_nj_per_thread_op"] < 5
    fits = {r["level"]: float(r["eps_pj"]) for r in csv.DictReader(open(RES / "fits.csv")) if r["lower_bound"] == "True"}
    assert load * 1e12 == pytest.approx(fits["l1"], rel=0.10)      # the L1 value, reproduced within 10%
