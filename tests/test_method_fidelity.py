"""Issue 16: what the seeds define, computed exactly, and real logs read.
Each test compares with a value recomputed here from the raw files (JSON, CSV)."""
import csv
import gzip
import json
import math
import os
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path

import pytest

import independent as ref
from independent_dist import union
from conftest import AMP_NCU_BASE, AMP_TRACE, DATA, raw_trace, read_ncu_csv
from tracedb import cli
from tracedb.store import db
from tracedb.query import reports
from tracedb.store.sql import rows, scalar
from tracedb.query.empty import whole_trace_without_iterations
from tracedb.ingest import IngestError, ingest_file

AMP = "h100_resnet50_bs64_amp"
RES = Path(__file__).parent.parent / "cuda_bench" / "results" / "nvidia_h200"
GRAPH_TRACE = DATA / "torch_graph" / "h100_cuda_graph_threads.json.gz"
SMI_3POWER = DATA / "power" / "h100_nvidia_smi_3power.csv.gz"
PKG = str(Path(__file__).parent.parent / ".pkg")


@pytest.fixture(scope="module")
def amp_db(tmp_path_factory):
    """The H100 amp trace and its ncu report (base units) matched to it."""
    con = db.connect(tmp_path_factory.mktemp("fid") / "amp.duckdb")
    ingest_file(con, AMP_TRACE)
    ingest_file(con, AMP_NCU_BASE, pair_with=AMP)
    yield con
    con.close()


@pytest.fixture(scope="module")
def ncu_ref():
    header, _, data = read_ncu_csv(AMP_NCU_BASE)
    return {q: ref.ncu_counters(header, data, metric) for q, metric in [
        ("E", "smsp__cycles_elapsed.sum"), ("A", "smsp__cycles_active.sum"), ("I", "smsp__issue_active.sum"),
        ("II", "smsp__inst_issued.sum"), ("C", "smsp__pipe_tensor_cycles_active.sum"),
        ("N", "smsp__inst_executed_pipe_tensor_op_hmma.sum")]}


def matched(con):
    return dict(rows(con, "SELECT trace_kernel_id, ncu_kernel_id FROM matches WHERE trace_run = ?", [AMP]))


# --- METHOD section 3: tensor-core bounds, GPU kernel time, distributions ---------------

def test_tensor_core_bounds_are_n_over_i_and_c_over_a(amp_db, ncu_ref):
    ids = list(matched(amp_db).values())
    s = {q: sum(v[i] for i in ids) for q, v in ncu_ref.items()}
    r = reports.run(amp_db, "utilization_levels", {"run": AMP}).to_pylist()[0]
    assert r["tc_issue_bound_pct"] == round(100 * s["N"] / s["II"], 3)       # N / issued instructions
    assert r["tc_active_bound_pct"] == round(100 * s["C"] / s["A"], 3)       # C / A
    # the bounds sit above the levels they bound (I <= E, A <= E)
    assert r["tc_issue_bound_pct"] >= r["tc_issue_pct"] and r["tc_active_bound_pct"] >= r["tc_active_pct"]
    per = {k["kernel_id"]: k for k in reports.run(amp_db, "kernel_utilization", {"run": AMP}).to_pylist()}
    for t, n in matched(amp_db).items():
        want_n = round(100 * ncu_ref["N"][n] / ncu_ref["II"][n], 3) if ncu_ref["II"][n] else None
        want_c = round(100 * ncu_ref["C"][n] / ncu_ref["A"][n], 3) if ncu_ref["A"][n] else None
        assert per[t]["tc_issue_bound_pct"] == want_n and per[t]["tc_active_bound_pct"] == want_c


def test_gpu_kernel_time_of_the_seed_counts_memcpy_and_memset(amp_db):
    acts = ref.iteration_activities(raw_trace(AMP_TRACE), 2)
    every = sum(d for _, _, d in acts)
    kernels = sum(d for _, kind, d in acts if kind == "kernel")
    assert {kind for _, kind, _ in acts} >= {"kernel", "memcpy", "memset"}
    g = reports.run(amp_db, "gpu_utilization", {"run": AMP}).to_pylist()[0]
    assert g["gpu_event_sum_ns"] == every and g["kernel_sum_ns"] == kernels and every > kernels
    assert g["gpu_event_util_pct"] == pytest.approx(100 * every / g["total_ns"])
    assert g["kernel_busy_ns"] <= g["gpu_event_busy_ns"] <= g["gpu_event_sum_ns"]
    # both unions from the raw JSON: the view sweeps kernels and all activity in one sort
    busy_kernels, busy_all = ref.iteration_unions(raw_trace(AMP_TRACE), 2)
    assert (g["gpu_event_busy_ns"], g["kernel_busy_ns"]) == (busy_all, busy_kernels) and busy_all > busy_kernels
    u = reports.run(amp_db, "utilization_levels", {"run": AMP}).to_pylist()[0]
    assert u["gpu_event_sum_ns"] == every and u["kernel_busy_ns"] == ref.utilization(raw_trace(AMP_TRACE))[2]["busy_ns"]


def test_the_unions_of_kernels_and_of_all_activity_are_apart(fresh_db):
    """A DDP rank whose copies run beside its kernels: the kernels' union leaves the
    copies out (one sort serves both unions in iteration_gpu_time, a kernel's latest
    earlier end only among kernels), every iteration's both unions as the raw JSON's."""
    path = DATA / "dist" / "ddp_overlap" / "rank0.json.gz"
    ingest_file(fresh_db, path, run="r")
    doc = raw_trace(path)
    got = {r["iteration"]: r for r in reports.run(fresh_db, "gpu_utilization", {"run": "r"}).to_pylist()}
    assert set(got) == set(ref.iterations(doc)) and len(got) >= 2
    for step, g in got.items():
        kernels, every = ref.iteration_unions(doc, step)
        assert (g["kernel_busy_ns"], g["gpu_event_busy_ns"]) == (kernels, every) and kernels < every


def test_busy_intervals_of_kernels_that_share_start_and_end(fresh_db, tmp_path):
    """The real trace with a twin of every GPU activity (the same start, and every
    other one the same end, on another stream, no launch). gpu_busy_intervals sorts twice
    (the sweep, then the islands); unless both break ties the same way (kernel_id), a
    twin after a gap can be counted in the island before the gap. Every island of
    every iteration, kernels alone and all activity, as merged from the raw JSON."""
    doc = raw_trace(AMP_TRACE)
    twins = []
    for _, e in ref.gpu_events(doc):
        t = json.loads(json.dumps(e, default=str))
        t["tid"] = 1000 + int(e["tid"]) if str(e["tid"]).isdigit() else "twin"
        t["args"] = dict(e.get("args") or {}, correlation=10 ** 9 + len(twins), stream=1000 + len(twins) % 3)
        if len(twins) % 2:                 # every other twin ends earlier: a tie on the start alone
            t["dur"] = float((Decimal(str(e["dur"])) / 2).quantize(Decimal("0.001")))
        twins.append(t)
    doc["traceEvents"] += twins
    path = tmp_path / "twins.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump(doc, f, default=float)
    ingest_file(fresh_db, path, run="t")
    doc = raw_trace(path)
    got = {}
    for activity, it, s, e in rows(fresh_db, "SELECT activity, iteration, start_ns, end_ns FROM gpu_busy_intervals "
                                             "WHERE run = 't' ORDER BY ALL"):
        got.setdefault((activity, it), []).append((s, e))
    steps = ref.iterations(doc)
    assert {it for _, it in got} == set(steps)
    for step in steps:
        spans = ref.iteration_intervals(doc, step)
        assert got[("kernels", step)] == [tuple(x) for x in union([(a, b) for kind, a, b in spans if kind == "kernel"])]
        assert got[("all", step)] == [tuple(x) for x in union([(a, b) for _, a, b in spans])]
        assert len([1 for kind, _, _ in spans if kind == "kernel"]) % 2 == 0      # every kernel has its twin
    # (DuckDB 2.0 happens to order the ties alike in both sorts even without kernel_id:
    # this checks the islands on tied data, it does not show the tie-break is needed)


def test_each_iteration_is_swept_apart(fresh_db, tmp_path):
    """A kernel launched in step 1 runs on past the start of step 2's kernel and copy:
    each iteration's unions are of its own launches only (the views sweep each
    iteration apart, which the narrowed reports rely on). No real fixture has GPU
    work of two iterations overlapping, so a small trace: steps [0, 1000] and [1000,
    2000] us; kernel A (launched at 100) runs 900-1300, kernel B (launched at 1050)
    1100-1200, a copy (launched at 1060) 1150-1350."""
    launch = lambda ts, c: {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1,  # noqa: E731
                            "tid": 1, "ts": ts, "dur": 10, "args": {"correlation": c}}
    gpu = lambda cat, name, ts, dur, c, stream: {"ph": "X", "cat": cat, "name": name, "pid": 0,  # noqa: E731
                                                 "tid": stream, "ts": ts, "dur": dur,
                                                 "args": {"correlation": c, "stream": stream, "device": 0}}
    ev = [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "pid": 1, "tid": 1,
           "ts": 1000 * (n - 1), "dur": 1000} for n in (1, 2)]
    ev += [launch(100, 1), launch(1050, 2), launch(1060, 3), gpu("kernel", "A", 900, 400, 1, 7),
           gpu("kernel", "B", 1100, 100, 2, 8), gpu("gpu_memcpy", "Memcpy HtoD", 1150, 200, 3, 9)]
    path = tmp_path / "overlap.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump({"traceEvents": ev}, f)
    ingest_file(fresh_db, path, run="o")
    got = {r["iteration"]: (r["kernel_busy_ns"], r["gpu_event_busy_ns"])
           for r in reports.run(fresh_db, "gpu_utilization", {"run": "o"}).to_pylist()}
    assert got == {1: (400_000, 400_000), 2: (100_000, 250_000)}
    doc = raw_trace(path)
    for step, unions in got.items():
        assert unions == ref.iteration_unions(doc, step)


def test_level_distributions_per_layer(amp_db, ncu_ref):
    t = reports.run(amp_db, "level_distributions", {"run": AMP}).to_pylist()
    ids = list(matched(amp_db).values())
    allk = {r["level"]: r for r in t if r["layer_type"] == "all"}
    for level, num, den in [("smsp_active", "A", "E"), ("issue_slot", "I", "E"), ("tc_issue", "N", "E"),
                            ("tc_issue_bound", "N", "II"), ("tc_active_bound", "C", "A")]:
        vals = [100 * ncu_ref[num][i] / ncu_ref[den][i] for i in ids if ncu_ref[den][i] > 0]
        r = allk[level]
        assert r["kernels"] == len(vals)
        assert r["mean_pct"] == pytest.approx(sum(vals) / len(vals))
        assert r["cycle_weighted_mean_pct"] == pytest.approx(
            100 * sum(ncu_ref[num][i] for i in ids) / sum(ncu_ref[den][i] for i in ids))
        assert r["min_pct"] == pytest.approx(min(vals)) and r["max_pct"] == pytest.approx(max(vals))
        m = sum(vals) / len(vals)
        assert r["std_pct"] == pytest.approx(math.sqrt(sum((v - m) ** 2 for v in vals) / (len(vals) - 1)))
    # the cycle-weighted mean over all kernels is utilization_levels' kernel-relative level
    u = reports.run(amp_db, "utilization_levels", {"run": AMP}).to_pylist()[0]
    assert round(allk["issue_slot"]["cycle_weighted_mean_pct"], 2) == u["issue_slot_pct"]
    # per layer: the layers' kernel counts add up to all kernels
    layers = [r for r in t if r["layer_type"] != "all" and r["level"] == "smsp_active"]
    assert len(layers) >= 3 and sum(r["kernels"] for r in layers) == allk["smsp_active"]["kernels"]
    # iteration=all: the step's rows, then the whole trace (iteration NULL): every matched
    # kernel, here the same ones (ncu measured the one step), so the same distributions
    every = reports.run(amp_db, "level_distributions", {"run": AMP, "iteration": "all"}).to_pylist()
    assert [r for r in every if r["iteration"] is not None] == t
    whole = [r for r in every if r["iteration"] is None]
    assert every[-len(whole):] == whole and len(whole) == len(t)
    for a, b in zip(whole, t):
        assert a["kernels"] == b["kernels"] and a["level"] == b["level"] and a["layer_type"] == b["layer_type"]
        assert a["cycle_weighted_mean_pct"] == pytest.approx(b["cycle_weighted_mean_pct"])


# --- METHOD section 7: shared-memory units, the offset, calibration spread -----------

def _ncu_sum(path, metrics, ids):
    """Sum of metrics over the given ncu IDs, from a base-units raw export (lines of
    ncu's own chatter before the header skipped)."""
    with gzip.open(path, "rt", newline="") as f:
        lines = [l for l in f if not l.startswith("==")]
    r = list(csv.reader(lines))
    header, data = r[0], r[2:]
    k = header.index("ID")
    return sum(float(row[header.index(m)].replace(",", "")) for row in data if int(row[k]) in ids for m in metrics)


@pytest.fixture(scope="module")
def app_db(tmp_path_factory):
    """The H200 application capture with its calibration (cuda_bench/results/nvidia_h200)."""
    con = db.connect(tmp_path_factory.mktemp("app") / "app.duckdb")
    ingest_file(con, RES / "app" / "trace.json.gz", run="resnet50_bs64_amp")
    ingest_file(con, RES / "app" / "power.csv.gz", pair_with="resnet50_bs64_amp")
    ingest_file(con, RES / "app" / "ncu_raw.csv.gz", pair_with="resnet50_bs64_amp")
    ingest_file(con, RES / "points.csv")
    yield con
    con.close()


def _checks():
    return {(r["level"], int(r["threads_per_block"]), int(r["blocks"])): r
            for r in csv.DictReader(open(RES / "checks.csv"))}


def test_shared_memory_energy_in_the_calibrations_unit(app_db):
    """The calibration counts shared accesses as 32-byte loads, the application as
    wavefronts; checks.csv counted both on one kernel (0.25 wavefronts per load)."""
    chk = _checks()
    ratio = float(chk[("shared", 1024, 132)]["counted"]) / float(chk[("shared", 1024, 132)]["expected"])
    assert ratio == 0.25 == float(chk[("shared", 32, 1)]["counted"]) / float(chk[("shared", 32, 1)]["expected"])
    t = {r["component"]: r for r in reports.run(app_db, "energy_breakdown", {"run": "resnet50_bs64_amp"}).to_pylist()}
    ncu_ids = {r[0] for r in rows(app_db, "SELECT ncu_kernel_id FROM matches m JOIN kernels k ON k.run = m.trace_run "
                                          "AND k.kernel_id = m.trace_kernel_id WHERE k.iteration = 2")}
    waves = _ncu_sum(RES / "app" / "ncu_raw.csv.gz", ["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
                                                      "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum"], ncu_ids)
    eps = next(float(r["eps_pj"]) for r in csv.DictReader(open(RES / "fits.csv"))
               if r["level"] == "shared" and r["lower_bound"] == "True")
    sh = t["shared"]
    assert sh["counted"] == waves and sh["counter_per_access"] == ratio and sh["accesses"] == waves / ratio
    assert sh["energy_j"] == pytest.approx(waves / ratio * eps * 1e-12)          # 4x the wavefront count x eps
    assert sh["energy_j"] == pytest.approx(4 * waves * eps * 1e-12)
    for level in ("l1", "l2", "dram"):                                          # sectors on both sides
        assert t[level]["counter_per_access"] == 1 and t[level]["accesses"] == t[level]["counted"]


def test_fit_offset_is_shown_and_not_added(app_db):
    t = {r["component"]: r for r in reports.run(app_db, "energy_breakdown", {"run": "resnet50_bs64_amp"}).to_pylist()}
    fits = {r["level"]: r for r in csv.DictReader(open(RES / "fits.csv")) if r["lower_bound"] == "True"}
    mem = ("shared", "l1", "l2", "dram")
    for level in mem:
        assert t[level]["fit_offset_j"] == pytest.approx(float(fits[level]["offset_j"]))
        assert t[level]["energy_j"] == pytest.approx(t[level]["accesses"] * t[level]["eps_pj"] * 1e-12, rel=1e-3)
    assert t["dynamic_rest"]["energy_j"] == pytest.approx(
        t["total"]["energy_j"] - t["static"]["energy_j"] - sum(t[l]["energy_j"] for l in mem))
    # why not: the offsets of one benchmark run would be 39% of the step's dynamic energy
    offsets = sum(t[l]["fit_offset_j"] for l in mem)
    assert offsets / (t["total"]["energy_j"] - t["static"]["energy_j"]) > 0.3 and t["shared"]["fit_offset_j"] < 0


def test_calibration_points_carry_their_counter_check():
    """Every point (committed, and rebuilt from the raw sweep) carries the count of the
    counter check it rests on, scaled to its accesses, and that check's shape."""
    from tracedb.cuda_bench import results
    meta = json.loads((RES / "run.json").read_text())
    rebuilt = results.points(results.read_raw((RES / "raw_sweep.csv").read_text()),
                             sum(meta["idle_power_w"].values()) / 2,
                             results.checks_from_rows(list(csv.DictReader(open(RES / "checks.csv")))))
    pts = list(csv.DictReader(open(RES / "points.csv")))
    assert [(p["counted"], p["check_shape"], p["sweep_pass"]) for p in rebuilt] == \
        [(float(p["counted"]), p["check_shape"], int(p["sweep_pass"])) for p in pts]
    chk = _checks()
    for p in pts:
        tpb, blocks = int(p["threads_per_block"]), int(p["blocks"])
        c = chk.get((p["level"], tpb, blocks)) or chk[(p["level"], 1024, 132) if blocks > 1 else (p["level"], 32, 1)]
        assert p["check_shape"] == f"{c['threads_per_block']}x{c['blocks']}"
        assert float(p["counted"]) == pytest.approx(int(p["accesses"]) * float(c["counted"]) / float(c["expected"]))
        assert int(p["sweep_pass"]) == int(p["repeat"]) // 10


def test_calibration_spread_over_repeats(app_db):
    pts = [r for r in csv.DictReader(open(RES / "points.csv"))]
    t = reports.run(app_db, "calibration_points", {"gpu": "NVIDIA H200"}).to_pylist()
    rep = reports.get("calibration_points")
    assert [c[0] for c in rep.columns] == list(t[0])
    groups = {}
    for p in pts:
        groups.setdefault((p["level"], int(p["threads_per_block"]), int(p["blocks"]), int(p["accesses"])), []).append(p)
    assert len(t) == len(groups)
    for r in t:
        g = groups[(r["level"], r["threads_per_block"], r["blocks"], int(r["accesses"]))]
        e = [float(p["energy_j"]) for p in g]
        m = sum(e) / len(e)
        assert r["repeats"] == len(e) == 3
        assert r["energy_mean_j"] == pytest.approx(m) and r["energy_min_j"] == min(e) and r["energy_max_j"] == max(e)
        assert r["energy_std_j"] == pytest.approx(math.sqrt(sum((x - m) ** 2 for x in e) / (len(e) - 1)))
        assert r["valid"] == all(p["valid"] == "True" for p in g)
        # each point rests on the check of its own shape: shared memory has one wavefront
        # per load with one thread per block, a quarter from 32 threads up
        assert r["check_shape"] == f"{r['threads_per_block']}x{r['blocks']}"
        if r["level"] == "shared":
            assert r["counted_per_access"] == (1.0 if r["threads_per_block"] == 1 else 0.25)
    # eps per pass of the sweep: a slope per pass, then mean/min/max over the passes
    fits = {(r["level"], r["threads_per_block"], r["blocks"]): r
            for r in reports.run(app_db, "calibration_fit", {"gpu": "NVIDIA H200"}).to_pylist()}
    for key in [("dram", 1024, 132), ("shared", 256, 132), ("l2", 1024, 132)]:
        slopes = []
        for ps in sorted({int(p["sweep_pass"]) for p in pts}):
            xs = [(int(p["accesses"]), float(p["energy_j"])) for p in pts if p["valid"] == "True"
                  and (p["level"], int(p["threads_per_block"]), int(p["blocks"])) == key and int(p["sweep_pass"]) == ps]
            mx, my = sum(x for x, _ in xs) / len(xs), sum(y for _, y in xs) / len(xs)
            slopes.append(1e12 * sum((x - mx) * (y - my) for x, y in xs) / sum((x - mx) ** 2 for x, _ in xs))
        f = fits[key]
        assert f["n_passes"] == len(slopes) == 3 and f["lower_bound"]
        assert f["eps_pass_mean_pj"] == pytest.approx(sum(slopes) / 3, abs=0.01)
        assert f["eps_pass_min_pj"] == pytest.approx(min(slopes), abs=0.01)
        assert f["eps_pass_max_pj"] == pytest.approx(max(slopes), abs=0.01)
        assert f["eps_pass_std_pj"] > 0


# --- METHOD section 6: nvidia-smi with three power columns ---------------------------

def _smi_rows(path, drop=()):
    with gzip.open(path, "rt") as f:
        r = list(csv.reader(f, skipinitialspace=True))
    keep = [i for i, h in enumerate(r[0]) if h.split(" [")[0] not in drop]
    return [[row[i] for i in keep] for row in r]


def test_nvidia_smi_log_with_three_power_columns(fresh_db, tmp_path):
    """A real H100 log of power.draw, power.draw.instant and power.draw.average: each kept,
    and the energy integrated from the instant power (METHOD.md section 6)."""
    ingest_file(fresh_db, SMI_3POWER, run="smi3")
    raw = _smi_rows(SMI_3POWER)[1:]
    w = lambda s: float(s.split()[0])
    got = rows(fresh_db, "SELECT power_w, instant_power_w, average_power_w FROM power WHERE run = 'smi3' ORDER BY ts_ns")
    assert got == [(w(r[3]), w(r[4]), w(r[5])) for r in raw]
    assert any(r[0] != r[1] for r in got)                         # draw and instant differ on this log
    fields = {r[0] for r in rows(fresh_db, "SELECT DISTINCT power_field FROM power_integral WHERE run = 'smi3'")}
    assert fields == {"instant"}
    # energy of the whole log: trapezoids of instant power over the timestamps
    ts = [int(Decimal(str(x))) for (x,) in rows(fresh_db, "SELECT ts_ns FROM power WHERE run = 'smi3' ORDER BY ts_ns")]
    inst = [w(r[4]) for r in raw]
    want = sum((ts[i + 1] - ts[i]) * (inst[i] + inst[i + 1]) / 2e9 for i in range(len(ts) - 1))
    assert scalar(fresh_db, "SELECT max(cum_j) FROM power_integral WHERE run = 'smi3'") == pytest.approx(want)
    # the same log without instant power integrates power.draw; with only the average, the average
    for drop, field, col in [(("power.draw.instant",), "draw", 3), (("power.draw.instant", "power.draw"), "average", 3)]:
        r = _smi_rows(SMI_3POWER, drop)
        p = tmp_path / f"smi_{field}.csv"
        p.write_text("\n".join(", ".join(x) for x in r) + "\n")
        ingest_file(fresh_db, p, run=f"smi_{field}")
        assert {x[0] for x in rows(fresh_db, f"SELECT DISTINCT power_field FROM power_integral WHERE run = 'smi_{field}'")} == {field}
        vals = [w(x[col]) for x in r[1:]]
        want = sum((ts[i + 1] - ts[i]) * (vals[i] + vals[i + 1]) / 2e9 for i in range(len(ts) - 1))
        assert scalar(fresh_db, f"SELECT max(cum_j) FROM power_integral WHERE run = 'smi_{field}'") == pytest.approx(want)


# --- traces from other profilers and versions -----------------------------------------

def _annotations(doc, name):
    return sorted((ref.ns(doc, e["ts"]), ref.ns(doc, e["ts"]) + int(Decimal(str(e["dur"])) * 1000))
                  for e in doc["traceEvents"] if e.get("name") == name and e.get("ph") == "X"
                  and e.get("cat") == "user_annotation")


def test_iterations_from_a_named_annotation(fresh_db):
    """A real trace with no ProfilerStep (profiler without a schedule): the
    record_function("train_iter") spans become iterations 0, 1, 2."""
    r = ingest_file(fresh_db, GRAPH_TRACE, run="g", options={"iterations_from": "train_iter"})
    doc = raw_trace(GRAPH_TRACE)
    spans = _annotations(doc, "train_iter")
    its = rows(fresh_db, "SELECT iteration, start_ns, marker_end_ns FROM iterations WHERE run = 'g' ORDER BY 1")
    assert its == [(i, s, e) for i, (s, e) in enumerate(spans)]
    la = ref.launches(doc)
    per = {i: 0 for i in range(len(spans))}
    for _, e in ref.gpu_events(doc):
        t = ref.ns(doc, la[e["args"]["correlation"]][1]["ts"])
        for i, (s, m) in enumerate(spans):
            if s <= t <= m and ref.GPU_CATS[e["cat"]] == "kernel":
                per[i] += 1
    got = dict(rows(fresh_db, "SELECT iteration, kernels FROM iteration_gpu_time WHERE run = 'g'"))
    assert got == per and all(n == 6 for n in per.values())      # 5 graph kernels + the sum of each step
    with pytest.raises(IngestError, match="--iterations-from 'no_such_op': no CPU-side event"):
        ingest_file(fresh_db, AMP_TRACE, options={"iterations_from": "no_such_op"})
    assert scalar(fresh_db, "SELECT count(*) FROM runs WHERE path LIKE '%resnet50%'") == 0   # rolled back


def test_a_kernel_gets_the_latest_marker_that_holds_its_launch(fresh_db, tmp_path):
    """Nested markers: the real graph trace with one more train_iter span around all
    three (from 1 µs before the first to 1 µs past the last launch). A kernel launched
    in an inner span is that span's iteration; the 16 launched after the last inner
    span ended are the outer one's, which began before all of them."""
    doc = raw_trace(GRAPH_TRACE)
    la = ref.launches(doc)
    launch_ns = {}
    for i, e in ref.gpu_events(doc):
        c = (e.get("args") or {}).get("correlation")
        launch_ns[i + 1] = ref.ns(doc, la[c][1]["ts"]) if c in la else ref.ns(doc, e["ts"])   # +1: the new first event
    first = min(Decimal(str(e["ts"])) for e in doc["traceEvents"] if e.get("name") == "train_iter")
    last = (max(launch_ns.values()) - (doc.get("baseTimeNanoseconds") or 0)) / Decimal(1000)
    outer = (f'{{"ph": "X", "cat": "user_annotation", "name": "train_iter", "pid": 543, "tid": 543, '
             f'"ts": {first - 1}, "dur": {last + 1 - (first - 1)}, "args": {{}}}},\n')
    with gzip.open(GRAPH_TRACE, "rt") as f:
        text = f.read()
    at = text.index("[", text.index('"traceEvents"')) + 1
    nested = tmp_path / "nested.json"
    nested.write_text(text[:at] + outer + text[at:])
    ingest_file(fresh_db, nested, run="n", options={"iterations_from": "train_iter"})
    base = doc.get("baseTimeNanoseconds") or 0
    outer_ns = (base + int((first - 1) * 1000), base + int((last + 1) * 1000))
    spans = [(it, s, m) for it, (s, m) in enumerate(sorted([outer_ns] + _annotations(doc, "train_iter")))]
    assert rows(fresh_db, "SELECT iteration, start_ns, marker_end_ns FROM iterations WHERE run = 'n' ORDER BY 1") == spans
    assert spans[0][2] > spans[3][2]     # the outer one first, around the others
    want = {k: max((s, it) for it, s, m in spans if s <= t <= m)[1] for k, t in launch_ns.items()}
    got = dict(rows(fresh_db, "SELECT kernel_id, iteration FROM kernels WHERE run = 'n'"))
    assert got == want
    assert sum(1 for it in want.values() if it == 0) == 16 and set(want.values()) == {0, 1, 2, 3}


def test_a_step_marker_without_a_number_takes_its_step_num(fresh_db, tmp_path):
    """ProfilerStep markers whose name has no number (a real trace of four steps, two
    renamed): the step comes from args.step_num, or the marker is no iteration. A number
    in the name wins over a step_num; a GPU-side copy is never a marker, whatever its
    args. The other steps keep their spans."""
    with gzip.open(DATA / "torch_loader" / "loader_fixed.json.gz", "rt") as f:
        doc = json.load(f)
    steps = [e for e in doc["traceEvents"] if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")
             and e.get("cat") != "gpu_user_annotation"]
    assert len(steps) >= 3
    renamed = int(steps[1]["name"].split("#")[1])
    steps[0]["name"] = "ProfilerStep#warmup"
    steps[0].setdefault("args", {})["step_num"] = 40
    steps[1]["name"] = "ProfilerStep#x"
    steps[2].setdefault("args", {})["step_num"] = 55          # the number in the name wins
    gpu_copy = next(e for e in doc["traceEvents"] if e.get("cat") == "gpu_user_annotation"
                    and str(e.get("name", "")).startswith("ProfilerStep#"))
    gpu_copy["name"] = "ProfilerStep#gpu"                      # a GPU-side copy is never a marker
    gpu_copy.setdefault("args", {})["step_num"] = 77
    path = tmp_path / "renamed.json"
    path.write_text(json.dumps(doc))
    ingest_file(fresh_db, path, run="r")
    raw = json.loads(path.read_text(), parse_float=Decimal)
    want = {}
    for e in raw["traceEvents"]:
        name = str(e.get("name", ""))
        if e.get("ph") != "X" or not name.startswith("ProfilerStep#") or e.get("cat") == "gpu_user_annotation":
            continue
        step = int(name[13:]) if name[13:].isdigit() else (e.get("args") or {}).get("step_num")
        if step is not None:
            s = ref.ns(raw, e["ts"])
            want.setdefault(step, (s, s + int(e["dur"] * 1000)))
    assert 40 in want and renamed not in want and not {55, 77} & set(want)
    got = rows(fresh_db, "SELECT iteration, start_ns, marker_end_ns FROM iterations WHERE run = 'r' ORDER BY 1")
    assert got == sorted((k, s, m) for k, (s, m) in want.items())


def test_without_markers_the_cli_says_how(tmp_path, capsys):
    dbp = str(tmp_path / "c.duckdb")
    assert cli.main(["ingest", str(GRAPH_TRACE), "--db", dbp]) == 0
    out = capsys.readouterr().out
    assert "0 iterations; no iteration markers" in out and "--iterations-from NAME" in out
    # a per-iteration report with no run given says why it is empty, as with the run named
    for extra in ([], ["--run", "h100_cuda_graph_threads"]):
        assert cli.main(["query", "top_kernels", "--db", dbp, "--format", "csv", *extra]) == 0
        assert capsys.readouterr().err.strip() == "tracedb: note: report top_kernels returned no rows: run " \
            "h100_cuda_graph_threads has no iterations (no step markers: ProfilerStep#N, step_num)"
    # iteration=all reads the whole trace too: an empty answer then says so (the CUPTI
    # trace's whole trace has no idle gap), and findings, which has no whole-trace row, not
    assert cli.main(["ingest", str(DATA / "cupti" / "a100_cupti_range_profiler.json.gz"), "--db", dbp]) == 0
    capsys.readouterr()
    for name, tail in (("idle_breakdown", ", and the whole trace (iteration NULL) has nothing for this report either"),
                       ("findings", "")):
        assert cli.main(["query", name, "--db", dbp, "--format", "csv", "--run", "a100_cupti_range_profiler",
                         "--param", "iteration=all"]) == 0
        assert capsys.readouterr().err.strip() == f"tracedb: note: report {name} returned no rows: run " \
            f"a100_cupti_range_profiler has no iterations (no step markers: ProfilerStep#N, step_num){tail}"
    assert cli.main(["ingest", str(DATA / "tf" / "cpu_sync_lenet_bs64.json.gz"), "--db", dbp]) == 0
    assert "no GPU kernel events" in capsys.readouterr().out
    assert cli.main(["ingest", str(AMP_TRACE), "--db", dbp, "--iterations-from", "nothing"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no CPU-side event of that name" in err and "Traceback" not in err


def test_iteration_all_of_a_run_without_iterations_is_its_whole_trace(fresh_db):
    """A trace without step markers has no steady iteration (the default gives no rows,
    and says why), but iteration=all still gives the whole trace (iteration NULL), as
    for a run with iterations: top_kernels every kernel, idle_breakdown the gaps
    between every kernel of each stream, launch_queue each stream's queue from the
    first kernel queued to the last one's end, all recomputed from the raw JSON."""
    ingest_file(fresh_db, GRAPH_TRACE, run="g")
    assert scalar(fresh_db, "SELECT count(*) FROM iterations WHERE run = 'g'") == 0
    doc = raw_trace(GRAPH_TRACE)
    la = ref.launches(doc)
    total, calls, streams = {}, {}, {}
    for i, e in ref.gpu_events(doc):
        if ref.GPU_CATS[e["cat"]] == "kernel":
            d = int(Decimal(str(e["dur"])) * 1000)
            total[e["name"]] = total.get(e["name"], 0) + d
            calls[e["name"]] = calls.get(e["name"], 0) + 1
            st = ref.ns(doc, e["ts"])
            streams.setdefault(e["args"]["stream"], []).append(
                (st, st + d, ref.ns(doc, la[e["args"]["correlation"]][1]["ts"]), i))
    for name in ("top_kernels", "idle_breakdown"):
        assert reports.run(fresh_db, name, {"run": "g"}).num_rows == 0
    t = reports.run(fresh_db, "top_kernels", {"run": "g", "iteration": "all", "limit": "100"}).to_pylist()
    assert {(r["iteration"], r["name"], r["launches"], r["total_ns"]) for r in t} == \
        {(None, n, calls[n], total[n]) for n in total}
    assert len(t) == len(total) > 5 and sum(r["time_share_pct"] for r in t) == pytest.approx(100, abs=0.05)
    want = {(stream, cause): ns for stream, ks in streams.items() for cause, ns in ref.idle_gaps(ks).items()}
    t = reports.run(fresh_db, "idle_breakdown", {"run": "g", "iteration": "all"}).to_pylist()
    assert {(r["stream"], r["cause"]): r["idle_ns"] for r in t} == want
    assert {r["iteration"] for r in t} == {None} and sum(want.values()) > 10 ** 8
    # launch_queue's window: from the first kernel queued (its call's end, or its start
    # when earlier) to the last kernel's end
    ends = {c: ref.ns(doc, l["ts"]) + int(Decimal(str(l["dur"])) * 1000) for c, (_, l) in la.items()}
    ks = [(ref.ns(doc, e["ts"]), int(Decimal(str(e["dur"])) * 1000), e["args"]["correlation"])
          for _, e in ref.gpu_events(doc) if ref.GPU_CATS[e["cat"]] == "kernel"]
    s, e = min(min(ends[c], st) for st, _, c in ks), max(st + d for st, d, _ in ks)
    want = ref.launch_queue(doc, s, e)
    assert reports.run(fresh_db, "launch_queue", {"run": "g"}).num_rows == 0
    t = reports.run(fresh_db, "launch_queue", {"run": "g", "iteration": "all"}).to_pylist()
    assert {r["iteration"] for r in t} == {None} and {r["stream"] for r in t} == set(want) == {7}
    for r in t:
        mean, top, idle = want[r["stream"]]
        assert (r["mean_queued"], r["max_queued"]) == (pytest.approx(mean, abs=0.0005), top)
        assert r["empty_gpu_idle_pct"] == pytest.approx(idle, abs=0.005)
    assert max(r["max_queued"] for r in t) > 1
    series = reports.run(fresh_db, "launch_queue", {"run": "g", "iteration": "all", "series": "true"}).to_pylist()
    assert min(r["ts_ns"] for r in series) == s      # its series too, from the first kernel queued
    # every report whose iteration parameter says a run without iterations gets its
    # whole-trace row (the note of an empty answer relies on it) gives one here, or needs
    # data this trace lacks
    said = [n for n, rep in reports.all_reports().items() if whole_trace_without_iterations(rep)]
    assert len(said) >= 10
    for name in said:
        try:
            t = reports.run(fresh_db, name, {"iteration": "all"} | ({"run": "g"} if reports.get(name).param("run") else {}))
        except reports.ReportError as e:
            assert "needs" in str(e) and "iterations" not in str(e), name
            continue
        assert t.num_rows and set(t.column("iteration").to_pylist()) == {None}, name
    # with no run given: every trace run's whole trace, none for an ncu report's kernels
    amp = ingest_file(fresh_db, AMP_TRACE).run
    ncu = ingest_file(fresh_db, AMP_NCU_BASE, pair_with=amp).run
    assert scalar(fresh_db, "SELECT count(*) FROM kernels WHERE run = ?", [ncu]) > 800
    for name in ("top_kernels", "idle_breakdown", "launch_queue"):
        t = reports.run(fresh_db, name, {"iteration": "all"}).to_pylist()
        assert {r["run"] for r in t if r["iteration"] is None} == {"g", amp}
        assert {r["run"] for r in t} == {"g", amp}


def test_graph_launches_and_other_threads_are_linked(fresh_db):
    """Kernels of CUDA graph replays share the cudaGraphLaunch's correlation id; kernels
    of a worker thread are launched there: each links to its own launch call."""
    ingest_file(fresh_db, GRAPH_TRACE, run="g")
    doc = raw_trace(GRAPH_TRACE)
    la = ref.launches(doc)
    got = {k: (ln, lt, le) for k, ln, lt, le in rows(
        fresh_db, "SELECT kernel_id, launch_name, launch_tid, launch_event_id FROM kernels WHERE run = 'g'")}
    graph = threads = 0
    for i, e in ref.gpu_events(doc):
        j, launch = la[e["args"]["correlation"]]
        assert got[i] == (launch["name"], str(launch["tid"]), j)
        graph += launch["name"] == "cudaGraphLaunch"
        threads += str(launch["tid"]) != "543"
    assert graph == 15 and threads == 16 and len(got) == 34


def test_launch_on_another_thread_takes_that_threads_op(fresh_db, tmp_path):
    """Synthetic edge case beside the real one: two threads run ops at the same time;
    each launch gets the op of its own thread, and a graph launch inside an op gives
    all its kernels that op."""
    ev = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::main_op", "pid": 1, "tid": 1, "ts": 100, "dur": 50},
        {"ph": "X", "cat": "cpu_op", "name": "aten::worker_op", "pid": 1, "tid": 2, "ts": 105, "dur": 30},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 2, "ts": 110, "dur": 2,
         "args": {"correlation": 7}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "pid": 1, "tid": 1, "ts": 120, "dur": 3,
         "args": {"correlation": 8}},
        {"ph": "X", "cat": "kernel", "name": "k_worker", "pid": 0, "tid": 7, "ts": 115, "dur": 5,
         "args": {"correlation": 7, "stream": 7, "device": 0}},
        {"ph": "X", "cat": "kernel", "name": "k_graph_a", "pid": 0, "tid": 8, "ts": 125, "dur": 5,
         "args": {"correlation": 8, "stream": 8, "device": 0}},
        {"ph": "X", "cat": "kernel", "name": "k_graph_b", "pid": 0, "tid": 8, "ts": 131, "dur": 5,
         "args": {"correlation": 8, "stream": 8, "device": 0}},
    ]
    p = tmp_path / "threads.json"
    p.write_text(json.dumps({"traceEvents": ev}))
    ingest_file(fresh_db, p, run="s")
    got = dict((n, (op, tid)) for n, op, tid in rows(fresh_db, "SELECT name, op_name, launch_tid FROM kernels WHERE run = 's'"))
    assert got == {"k_worker": ("aten::worker_op", "2"), "k_graph_a": ("aten::main_op", "1"),
                   "k_graph_b": ("aten::main_op", "1")}


# --- the database lock ----------------------------------------------------------------

HOLD = """
import sys, time, duckdb
con = duckdb.connect(sys.argv[1])
print("held", flush=True)
time.sleep(float(sys.argv[2]))
con.close()
"""


def _hold(path, seconds):
    p = subprocess.Popen([sys.executable, "-c", HOLD, str(path), str(seconds)], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "held"
    return p


def _tracedb(*args):
    env = {**os.environ, "PYTHONPATH": PKG}
    return subprocess.run([sys.executable, "-m", "tracedb.cli", *args], capture_output=True, text=True, env=env)


def test_a_held_database_is_named_and_waited_for(tmp_path):
    dbp = tmp_path / "l.duckdb"
    con = db.connect(dbp)
    ingest_file(con, DATA / "tf" / "cpu_sync_lenet_bs64.json.gz")
    con.close()
    holder = _hold(dbp, 60)
    try:
        r = _tracedb("query", "overview", "--db", str(dbp))            # fails at once, in tracedb's words
        assert r.returncode == 1 and "Traceback" not in r.stderr and r.stderr.count("\n") == 1
        assert f"the database is in use by PID {holder.pid}" in r.stderr and "--wait SECONDS" in r.stderr
        r = _tracedb("ingest", str(DATA / "tf" / "cpu_async_lenet_bs64.json.gz"), "--db", str(dbp), "--wait", "1")
        assert r.returncode == 1 and "waiting up to 1 s" in r.stderr and "(waited 1." in r.stderr
    finally:
        holder.kill()
        holder.wait()
    holder = _hold(dbp, 3)
    t0 = time.monotonic()
    r = _tracedb("ingest", str(DATA / "tf" / "cpu_async_lenet_bs64.json.gz"), "--db", str(dbp), "--wait", "60")
    holder.wait()
    assert r.returncode == 0, r.stderr
    assert "waiting up to 60 s" in r.stderr and "loaded" in r.stdout and time.monotonic() - t0 < 60


# --- done by the architecture refactor, checked here on real data ----------------------

def test_param_and_run_checks_from_the_refactor(amp_db):
    with pytest.raises(reports.ReportError, match="batch_sise"):
        reports.run(amp_db, "utilization_levels", {"run": AMP, "batch_sise": "64"})
    with pytest.raises(reports.ReportError, match="run"):
        reports.run(amp_db, "calibration_fit", {"run": AMP})


def test_a_failed_pairing_rolls_the_ingest_back(fresh_db, tmp_path):
    """--pair-with a trace the real power log cannot be aligned with (a trace of
    metadata only): the MatchError is one clear IngestError, and the power run is
    not left behind."""
    p = tmp_path / "meta_only.json"
    p.write_text(json.dumps({"traceEvents": [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "x"}}]}))
    ingest_file(fresh_db, p, run="empty")
    with pytest.raises(IngestError, match="--pair-with 'empty': trace run 'empty' has no timed events"):
        ingest_file(fresh_db, DATA / "power" / "h100_resnet50_bs64_amp.csv", pair_with="empty")
    assert scalar(fresh_db, "SELECT count(*) FROM runs WHERE kind = 'power'") == 0
    assert scalar(fresh_db, "SELECT count(*) FROM power") == 0


def test_a_trace_without_kernel_events_says_so_in_reports(fresh_db):
    """A trace with iterations but no GPU kernel events (like Kineto's CUPTI
    range-profiler trace; here the real CPU-only TensorFlow trace): the levels say why."""
    ingest_file(fresh_db, DATA / "tf" / "cpu_sync_lenet_bs64.json.gz", run="cpu")
    r = reports.run(fresh_db, "utilization_levels", {"run": "cpu"}).to_pylist()[0]
    assert r["kernel_busy_ns"] == 0 and r["smsp_active_pct"] is None
    assert r["note"].startswith("no GPU kernel events in this iteration") and "range-profiler" in r["note"]
