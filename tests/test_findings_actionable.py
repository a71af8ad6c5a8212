"""Findings a user acts on: graph-captured steps, costs in GPU time, energy, pairing
sanity and the diff gate, checked on real captures (tests/data/graph_h200 and the
rest) against values computed independently from the raw files."""
import gzip
import json
from decimal import Decimal

import pytest

from tracedb.store import db
from tracedb.ingest import ingest_file
from tests.conftest import DATA
from tests.independent import ns

G = DATA / "graph_h200"
GRAPH_TRAIN = G / "h200_graph_train.json.gz"
GRAPH_DECODE = G / "h200_graph_decode.json.gz"
JAX = G / "h200_jax_bf16_mlp.trace.json.gz"
DDP0 = DATA / "dist" / "ddp" / "rank0.json.gz"


def load(path):
    with gzip.open(path, "rt") as f:
        return json.load(f, parse_float=Decimal)


def dur_ns(e):
    return int(Decimal(str(e["dur"])) * 1000)


@pytest.fixture(scope="module")
def gdb(tmp_path_factory):
    con = db.connect(tmp_path_factory.mktemp("i50") / "g.duckdb")
    ingest_file(con, GRAPH_TRAIN, run="gtrain")
    ingest_file(con, GRAPH_DECODE, run="gdecode")
    ingest_file(con, JAX, run="jax")
    ingest_file(con, DDP0, run="ddp0")
    yield con
    con.close()


# -- layer types of XLA and NCCL kernels ---------------------------------------------------

def test_xla_convert_fusions_are_not_convolution_and_nccl_is_communication(gdb):
    jax_doc, ddp_doc = load(JAX), load(DDP0)
    convert = [e for e in jax_doc["traceEvents"] if e.get("ph") == "X" and "convert" in str(e.get("name"))
               and e.get("pid") == 1]  # pid 1: /device:GPU:0
    nccl = [e for e in ddp_doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "kernel"
            and str(e.get("name")).startswith("ncclDevKernel")]
    assert convert and nccl
    got = dict(gdb.execute(
        "SELECT l.layer_type, sum(k.dur_ns) FROM kernels k JOIN kernel_layers l USING (run, kernel_id) "
        "WHERE k.run = 'jax' AND k.name LIKE '%convert%' GROUP BY 1").fetchall())
    assert set(got) == {"elementwise/activation"}
    assert abs(got["elementwise/activation"] - sum(dur_ns(e) for e in convert)) <= len(convert)  # ns rounding
    comm = gdb.execute("SELECT count(*) FILTER (l.layer_type = 'communication'), count(*) FROM kernels k "
                       "JOIN kernel_layers l USING (run, kernel_id) WHERE k.run = 'ddp0' "
                       "AND k.name LIKE 'ncclDevKernel%'").fetchone()
    assert comm == (len(nccl), len(nccl))
    # no convolution anywhere in either (neither has one)
    assert gdb.execute("SELECT count(*) FROM kernel_layers WHERE run IN ('jax', 'ddp0') "
                       "AND layer_type = 'convolution'").fetchone()[0] == 0


# -- CUDA graphs as a shape ----------------------------------------------------------------

def raw_graph_launches(doc, step_names):
    """correlation -> (launch call, [nodes]) of each cudaGraphLaunch/cuGraphLaunch inside the
    ProfilerStep markers named (the CPU side of the step), straight from the JSON."""
    ev = doc["traceEvents"]
    steps = [(ns(doc, e["ts"]), ns(doc, e["ts"]) + dur_ns(e)) for e in ev
             if e.get("ph") == "X" and e.get("name") in step_names and e.get("cat") == "user_annotation"]
    out = {}
    for e in ev:
        if e.get("ph") == "X" and "GraphLaunch" in str(e.get("name")) and "correlation" in e.get("args", {}):
            t = ns(doc, e["ts"])
            if any(s <= t < end for s, end in steps):
                out[e["args"]["correlation"]] = (e, [])
    for e in ev:
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") \
                and e.get("args", {}).get("correlation") in out:
            out[e["args"]["correlation"]][1].append(e)
    return out


@pytest.mark.parametrize("path,run,step", [(GRAPH_TRAIN, "gtrain", "ProfilerStep#5"),
                                           (GRAPH_DECODE, "gdecode", "ProfilerStep#3")])
def test_graph_launches_and_their_launch_delay(gdb, path, run, step):
    doc = load(path)
    raw = raw_graph_launches(doc, {step})
    it = int(step.split("#")[1])
    got = gdb.execute("SELECT launch_call_ns, nodes, launch_delay_ns FROM graph_launches "
                      "WHERE run = ? AND iteration = ? ORDER BY launch_ts_ns", [run, it]).fetchall()
    want = sorted(((ns(doc, c["ts"]), dur_ns(c), len(nodes),
                    min(ns(doc, n["ts"]) for n in nodes) - (ns(doc, c["ts"]) + dur_ns(c)))
                   for c, nodes in raw.values()))
    assert len(got) == len(want) == (1 if run == "gtrain" else 32)
    for (call, nodes, delay), (_, w_call, w_nodes, w_delay) in zip(got, want):
        assert (nodes, abs(call - w_call) <= 1, abs(delay - w_delay) <= 1) == (w_nodes, True, True)
    # launch_delay counts a graph once, by its first node (it counted every node: 34 in the
    # training step, 992 in the decode step, each node's place in the graph read as delay)
    from tracedb.query import reports
    by = {r["launch_name"]: r for r in reports.run(gdb, "launch_delay", {"run": run, "iteration": it, "by": "launch"}).to_pylist()}
    g = by["cudaGraphLaunch"]
    delays = sorted(w[3] for w in want)
    mid = len(delays) // 2
    median = delays[mid] if len(delays) % 2 else (delays[mid - 1] + delays[mid]) / 2
    assert g["kernels"] == len(want)
    assert abs(g["delay_ns"] - median) <= 1


def _finding(con, run, rule):
    from tracedb.analysis import advise
    return next(f for f in advise.evaluate(con, run=run, only={rule}) if f["rule"] == rule)


@pytest.mark.parametrize("path,run,launches", [(GRAPH_TRAIN, "gtrain", 1), (GRAPH_DECODE, "gdecode", 32),
                                               (JAX, "jax", 1)])
def test_tiny_kernels_knows_the_step_is_already_a_graph(gdb, path, run, launches):
    """It advised "capture the step in a CUDA graph" (medium, 69.7% of the kernels) for a step
    that is one graph launch: graph nodes have no launch call of their own."""
    f = _finding(gdb, run, "tiny_kernels")
    it = f["iteration"]
    doc = load(path)
    if run == "jax":     # XLA's trace names the step by step_num and the graph by cuda_graph_id
        ev = doc["traceEvents"]
        step = next(e for e in ev if e.get("ph") == "X" and e.get("args", {}).get("step_num") == str(it))
        s, e_ = ns(doc, step["ts"]), ns(doc, step["ts"]) + dur_ns(step)
        calls = [e for e in ev if "GraphLaunch" in str(e.get("name")) and s <= ns(doc, e["ts"]) < e_]
        corr = {c["args"]["correlation_id"] for c in calls}
        nodes = [e for e in ev if e.get("pid") == 1 and e.get("args", {}).get("correlation_id") in corr
                 and not str(e.get("name")).startswith("Memset")]
    else:
        raw = raw_graph_launches(doc, {f"ProfilerStep#{it}"})
        calls = [c for c, _ in raw.values()]
        nodes = [n for _, ns_ in raw.values() for n in ns_ if n.get("cat") == "kernel"]
    assert len(calls) == launches
    assert f["severity"] == "ok" and f["value"] == 0
    assert f"already runs {len(nodes)} of its" in f["evidence"]
    assert f"as nodes of {launches} CUDA graph launch(es)" in f["evidence"]
    call_us = sum(dur_ns(c) for c in calls) / 1e3
    assert f"{call_us:.1f} us in the graph launch calls" in f["evidence"]


def test_tiny_kernels_still_fires_on_an_eager_step(gdb):
    """The cause present: the eager GPT step launches one kernel at a time."""
    con = gdb
    if not con.execute("SELECT count(*) FROM runs WHERE run = 'geager'").fetchone()[0]:
        ingest_file(con, G / "h200_gpt_eager.json.gz", run="geager")
    f = _finding(con, "geager", "tiny_kernels")
    assert f["severity"] == "high" and f["value"] > 20      # the GPU sat idle 36% of the step
    assert "already runs" not in f["evidence"]


# -- sync_in_step: the cost is the GPU idle the sync causes --------------------------------

SYNC = {"cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize", "cudaMemcpy"}
GPU = {"kernel", "gpu_memcpy", "gpu_memset"}


def raw_sync_cost(doc, step):
    """(calls, host ns blocked, GPU ns lost, iteration ns) of ProfilerStep#step, from the JSON:
    per sync call [s0, e1], the GPU idle from max(s0, the latest end of activity started before
    e1) to the first activity start at or after e1, at most the call's duration."""
    ev = doc["traceEvents"]
    marker = next(e for e in ev if e.get("ph") == "X" and e.get("name") == f"ProfilerStep#{step}"
                  and e.get("cat") != "gpu_user_annotation")
    s, m = ns(doc, marker["ts"]), ns(doc, marker["ts"]) + dur_ns(marker)
    acts = sorted((ns(doc, e["ts"]), ns(doc, e["ts"]) + dur_ns(e)) for e in ev
                  if e.get("ph") == "X" and e.get("cat") in GPU)
    calls = [e for e in ev if e.get("ph") == "X" and e.get("name") in SYNC and s <= ns(doc, e["ts"]) < m]
    lost = 0
    for c in calls:
        s0, e1 = ns(doc, c["ts"]), ns(doc, c["ts"]) + dur_ns(c)
        last = max((b for a, b in acts if a < e1), default=None)
        nxt = min((a for a, b in acts if a >= e1), default=None)
        if nxt is not None:
            lost += max(0, min(nxt - max(last if last is not None else s0, s0), dur_ns(c)))
    # the iteration: marker start to the later of its end and the last activity launched inside
    corr = {e["args"]["correlation"] for e in ev if e.get("ph") == "X" and e.get("cat") == "cuda_runtime"
            and "correlation" in e.get("args", {}) and s <= ns(doc, e["ts"]) <= m}
    end = max([m] + [ns(doc, e["ts"]) + dur_ns(e) for e in ev if e.get("ph") == "X" and e.get("cat") in GPU
                     and e.get("args", {}).get("correlation") in corr])
    return len(calls), sum(dur_ns(c) for c in calls), lost, end - s


@pytest.fixture(scope="module")
def sdb(tmp_path_factory):
    con = db.connect(tmp_path_factory.mktemp("i50s") / "s.duckdb")
    for p in (DATA / "torch_loader" / "loader_slow_bs256.json.gz", DATA / "torch_loader" / "loader_slow.json.gz",
              GRAPH_DECODE, DATA / "capture_h200" / "resnet50_bs2176" / "resnet50_bs2176.pt.trace.json.gz"):
        ingest_file(con, p)
    yield con
    con.close()


@pytest.mark.parametrize("path,run,severity", [
    (DATA / "torch_loader" / "loader_slow_bs256.json.gz", "loader_slow_bs256", "medium"),
    # the host blocked 664 ms in a pageable copy's sync while the GPU lost 1.06 ms: not a cost
    (DATA / "capture_h200" / "resnet50_bs2176" / "resnet50_bs2176.pt.trace.json.gz", "resnet50_bs2176", "ok"),
    (DATA / "torch_loader" / "loader_slow.json.gz", "loader_slow", "ok"),       # GPU starved by the loader
    (GRAPH_DECODE, "h200_graph_decode", "ok"),                                 # 7 us: was medium
])
def test_sync_in_step_values_the_gpu_time_lost(sdb, path, run, severity):
    f = _finding(sdb, run, "sync_in_step")
    n, blocked, lost, it_ns = raw_sync_cost(load(path), f["iteration"])
    assert n >= 1
    assert f["value"] == pytest.approx(100.0 * lost / it_ns, abs=1e-3)
    assert f"the GPU sat idle {lost / 1e6:.3f} ms" in f["evidence"]
    assert f"host was blocked {blocked / 1e6:.3f} ms" in f["evidence"]
    assert f["severity"] == severity


# -- energy: the counter between its update points; counter vs integral ---------------------

POWER_TRACE, POWER_LOG = G / "h200_power_steps.json.gz", G / "h200_power_steps_power.csv.gz"


def power_rows(path):
    import csv
    with gzip.open(path, "rt") as f:
        return [r for r in csv.DictReader(f)]


def updates(rows_):
    """(t, J) update points: a sample whose energy counter differs from the previous one's,
    midway between the two samples."""
    pts = [(int(r["timestamp_ns"]), int(r["energy_mj"]) / 1e3) for r in rows_]
    return [(t0 + (t1 - t0) // 2, v1) for (t0, v0), (t1, v1) in zip(pts, pts[1:]) if v1 != v0]


def lin(points, t):
    for (t0, v0), (t1, v1) in zip(points, points[1:]):
        if t0 <= t <= t1:
            return v0 + (v1 - v0) * (t - t0) / (t1 - t0)


def trapezoid(rows_, a, b):
    pts = [(int(r["timestamp_ns"]), int(r["instant_power_mw"]) / 1e3) for r in rows_]
    inner = [(a, lin(pts, a))] + [(t, p) for t, p in pts if a < t < b] + [(b, lin(pts, b))]
    return sum((t1 - t0) * (p0 + p1) / 2 for (t0, p0), (t1, p1) in zip(inner, inner[1:])) / 1e9


@pytest.fixture(scope="module")
def pdb(tmp_path_factory):
    con = db.connect(tmp_path_factory.mktemp("i50p") / "p.duckdb")
    ingest_file(con, POWER_TRACE, run="pw")
    ingest_file(con, POWER_LOG, pair_with="pw")
    cap = DATA / "capture_h200" / "resnet50_bs2176"
    ingest_file(con, cap / "resnet50_bs2176.pt.trace.json.gz")
    ingest_file(con, cap / "resnet50_bs2176_power.csv.gz", pair_with="resnet50_bs2176")
    yield con
    con.close()


def test_energy_counter_interpolates_between_its_update_points(pdb):
    """A 40 ms window between two counter updates (100 ms apart, sampled every 5 ms): the
    counter read 0 J there (interpolated between repeated samples); now the mean power of the
    update period times the window."""
    from tracedb.query import reports
    raw = power_rows(POWER_LOG)
    up = updates(raw)
    period = sorted(b[0] - a[0] for a, b in zip(up, up[1:]))[len(up) // 2]
    assert 95e6 < period < 105e6                    # NVML's ~100 ms, measured from the log
    run_phase = [u for u in up if u[0] > int(next(r["timestamp_ns"] for r in raw if r["phase"] == "run"))]
    (t0, v0), (t1, v1) = run_phase[10], run_phase[11]
    a, b = t0 + 30_000_000, t0 + 70_000_000
    assert b < t1
    r = reports.run(pdb, "energy_summary", {"run": "pw", "start_ns": str(a), "end_ns": str(b)}).to_pylist()[0]
    want = lin(up, b) - lin(up, a)
    assert r["energy_counter_j"] == pytest.approx(want, rel=1e-9)
    assert r["energy_counter_j"] == pytest.approx((v1 - v0) * 0.04e9 / (t1 - t0), rel=1e-9)
    assert r["energy_counter_j"] / 0.04 > 300       # the GPU drew hundreds of W (it read 0 J)


def test_counter_and_integral_disagreeing_beyond_accuracy_is_a_finding(pdb):
    f = _finding(pdb, "pw", "energy_sources_disagree")
    it = f["iteration"]
    s, e = pdb.execute("SELECT start_ns, end_ns FROM iterations WHERE run = 'pw' AND iteration = ?", [it]).fetchone()
    raw = power_rows(POWER_LOG)
    up = updates(raw)
    counter, integral = lin(up, e) - lin(up, s), trapezoid(raw, s, e)
    assert f["value"] == pytest.approx(100 * abs(counter - integral) / counter, abs=1e-3)
    assert f["value"] > 10 and f["severity"] == "medium"
    # and the window-length rule passed on it (2.6 sensor periods): the gap the issue saw
    assert _finding(pdb, "pw", "sensor_window_too_short")["severity"] == "ok"
    # the whole log: both measures agree within the sensors' accuracy (the window is at fault)
    whole_c = up[-1][1] - up[0][1]
    whole_i = trapezoid(raw, up[0][0], up[-1][0])
    assert abs(whole_c - whole_i) / whole_c < 0.05
    assert f"they are {100 * abs(whole_c - whole_i) / whole_c:.1f}% apart" in f["evidence"]
    from tracedb.query import reports
    note = reports.run(pdb, "energy_summary", {"run": "pw"}).to_pylist()[0]["note"]
    assert "beyond the sensors' +/-5% each" in note


def test_counter_and_integral_agreeing_is_no_finding(pdb):
    """The cause absent: the 3 s iteration of the H200 ResNet-50 capture."""
    f = _finding(pdb, "resnet50_bs2176", "energy_sources_disagree")
    assert f["severity"] == "ok" and f["value"] < 2


# -- the diff gate: step time first -------------------------------------------------------

GPT32, GPTAMP = "h100_gpt2_bs8_fp32", "h100_gpt2_bs8_amp"


@pytest.fixture(scope="module")
def diff_db(tmp_path_factory):
    path = tmp_path_factory.mktemp("i50d") / "d.duckdb"
    con = db.connect(path)
    for run in (GPT32, GPTAMP):
        ingest_file(con, DATA / "flops" / f"{run}.json.gz")
    ingest_file(con, G / "h200_gpt_eager.json.gz", run="eager")
    ingest_file(con, G / "h200_gpt_compiled.json.gz", run="compiled")
    con.close()
    return str(path)


def test_diff_passes_a_faster_run_whose_other_metrics_fell(diff_db, capsys):
    """amp GPT-2 is 11.3% faster than fp32 while GPU utilization fell 49%: the gate failed
    (exit 1, "WORSE") on the utilization; the step time decides, --fail-on asks for more."""
    import tests.independent as ref
    from tracedb import cli
    (s32,), (samp,) = (ref.utilization(load(DATA / "flops" / f"{r}.json.gz")).values() for r in (GPT32, GPTAMP))
    delta = 100 * (samp["total_ns"] - s32["total_ns"]) / s32["total_ns"]
    assert delta < -10
    assert cli.main(["diff", "--db", diff_db, GPT32, GPTAMP, "--format", "csv"]) == 0
    err = capsys.readouterr().err
    assert err.startswith(f"{GPTAMP} vs {GPT32}: step time {delta:+.1f}% (better;")
    assert "gpu_util -49.0% worse" in err and "WORSE" not in err
    assert cli.main(["diff", "--db", diff_db, GPT32, GPTAMP, "--fail-on", "gpu_util", "--format", "csv"]) == 1
    assert "WORSE beyond 5% (gpu_util -49.0%)" in capsys.readouterr().err
    # the other way round the step time is worse: the gate fails without being asked
    assert cli.main(["diff", "--db", diff_db, GPTAMP, GPT32, "--format", "csv"]) == 1
    capsys.readouterr()
    assert cli.main(["diff", "--db", diff_db, GPT32, GPTAMP, "--fail-on", "speed"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--fail-on 'speed' is not a metric of diff" in err


def test_diff_compiled_vs_eager_with_noise_from_the_iterations(diff_db, capsys):
    import statistics
    import tests.independent as ref
    from tracedb import cli
    ue, uc = (ref.utilization(load(G / f"h200_gpt_{k}.json.gz")) for k in ("eager", "compiled"))
    assert len(ue) == len(uc) == 5
    rsd = [100 * statistics.stdev([v["total_ns"] for v in u.values()]) / statistics.fmean([v["total_ns"] for v in u.values()])
           for u in (ue, uc)]
    assert cli.main(["diff", "--db", diff_db, "eager", "compiled", "--format", "csv"]) == 0
    err = capsys.readouterr().err
    noise = (rsd[0] ** 2 + rsd[1] ** 2) ** .5
    assert f"noise {noise:.1f}% from the iterations" in err and "(better;" in err
    assert cli.main(["diff", "--db", diff_db, "compiled", "eager", "--format", "csv"]) == 1


# -- pairing sanity -------------------------------------------------------------------------

RESNET_TRACE = DATA / "torch" / "h100_resnet50_bs64_amp.json.gz"
RESNET_NCU = DATA / "ncu" / "h100_resnet50_bs64_amp_raw_baseunits.csv.gz"
GPT_NCU = DATA / "flops" / "h100_gpt2_bs8_amp_ncu_raw_baseunits.csv.gz"
RESNET = "h100_resnet50_bs64_amp"


def _names_known(ncu_csv, trace_json):
    """Share of the ncu report's kernels whose name (its last '::' part, without template
    arguments) names a kernel of the trace: straight from the two raw files."""
    from tests.conftest import read_ncu_csv

    def short(n):
        return n.split("<")[0].split("(")[0].split("::")[-1].replace("void ", "").strip()
    header, _, data = read_ncu_csv(ncu_csv)
    col = header.index("Kernel Name")
    trace = {short(str(e["name"])) for e in load(trace_json)["traceEvents"] if e.get("cat") == "kernel"}
    return 100.0 * sum(short(r[col]) in trace for r in data) / len(data)


def test_a_foreign_ncu_report_is_not_paired(tmp_path, capsys):
    from tracedb import cli
    # the raw files: GPT-2's report hardly names a ResNet-50 kernel, ResNet-50's own names them all
    assert _names_known(GPT_NCU, RESNET_TRACE) < 90 and _names_known(RESNET_NCU, RESNET_TRACE) == 100
    d = str(tmp_path / "p.duckdb")
    assert cli.main(["ingest", str(RESNET_TRACE), "--db", d]) == 0
    capsys.readouterr()
    # autopaired with the only trace: it was "matched 328 of 390 (84.1%)"; now loaded unpaired
    assert cli.main(["ingest", str(GPT_NCU), "--db", d]) == 0
    out = capsys.readouterr().out
    assert "not paired with h100_resnet50_bs64_amp (the only trace in the database)" in out
    assert "have another name" in out
    con = db.connect(d, read_only=True)
    assert con.execute("SELECT count(*) FROM match_runs").fetchone()[0] == 0
    con.close()
    assert cli.main(["ingest", str(RESNET_NCU), "--pair-with", RESNET, "--db", d]) == 0
    capsys.readouterr()
    # --pair-with the wrong report: refused, one line naming the file
    assert cli.main(["match", RESNET, "h100_gpt2_bs8_amp_ncu_raw_baseunits", "--db", d]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "refused:" in err and "more than 20%" in err
    # kept with --force, flagged; the reports keep the sound pairing
    assert cli.main(["match", RESNET, "h100_gpt2_bs8_amp_ncu_raw_baseunits", "--force", "--db", d]) == 0
    out = capsys.readouterr().out
    assert "FORCED, its counters are not this trace's" in out
    con = db.connect(d, read_only=True)
    (ncu, pct), = con.execute("SELECT ncu_run, name_mismatch_pct FROM trace_ncu_pairs").fetchall()
    assert ncu == "h100_resnet50_bs64_amp_raw_baseunits" and pct == 0
    from tracedb.query import reports
    q = {r["ncu_run"]: r for r in reports.run(con, "match_quality", {"run": RESNET}).to_pylist()}
    bad = q["h100_gpt2_bs8_amp_ncu_raw_baseunits"]
    assert bad["names_disagree"] > 0.2 * bad["matched"] and q["h100_resnet50_bs64_amp_raw_baseunits"]["names_disagree"] == 0
    con.close()


def test_rm_pairing_removes_exactly_the_pairing_named(tmp_path, capsys):
    """One ncu report (capture_h100_ncu) matched with two traces of the same script:
    `rm --pairing` removed both pairings."""
    from tracedb import cli
    from tests.conftest import read_ncu_csv
    d = str(tmp_path / "r.duckdb")
    a = DATA / "capture_h100" / "resnet18_bs64" / "resnet18_bs64.pt.trace.json.gz"
    b = DATA / "capture_h100_ncu" / "resnet18_bs64" / "resnet18_bs64.pt.trace.json.gz"
    n = DATA / "capture_h100_ncu" / "resnet18_bs64" / "resnet18_bs64_ncu_raw.csv.gz"
    assert cli.main(["ingest", str(a), "--run", "a", "--db", d]) == 0
    assert cli.main(["ingest", str(b), "--run", "b", "--db", d]) == 0
    assert cli.main(["ingest", str(n), "--run", "n", "--pair-with", "b", "--db", d]) == 0
    assert cli.main(["match", "a", "n", "--db", d]) == 0
    capsys.readouterr()
    assert cli.main(["rm", "--pairing", "n", "--db", d]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "paired with 2 traces (a, b)" in err
    assert cli.main(["rm", "--pairing", "n", "--trace", "a", "--db", d]) == 0
    con = db.connect(d, read_only=True)
    left = con.execute("SELECT trace_run, count(*) FROM matches GROUP BY 1").fetchall()
    runs = con.execute("SELECT trace_run FROM match_runs").fetchall()
    paired = con.execute("SELECT paired_run FROM runs WHERE run = 'n'").fetchone()[0]
    con.close()
    _, _, data = read_ncu_csv(n)
    assert left == [("b", len(data))] and runs == [("b",)] and paired == "b"


# -- the ops table from JAX/XLA host events -----------------------------------------------

def test_ops_of_a_jax_profile_from_its_host_traceme_events(gdb):
    """It refused: "needs CPU-side profiler events"; the profile holds host TraceMe events
    (PjitFunction, PjRt Execute, cuGraphLaunch, the step annotation)."""
    from tracedb.query import reports
    doc = load(JAX)
    ev = doc["traceEvents"]
    rows = reports.run(gdb, "ops", {"run": "jax", "iteration": "all"}).to_pylist()
    whole = {(r["level"], r["name"]): r for r in rows if r["iteration"] is None}
    host = [e for e in ev if e.get("ph") == "X" and e.get("pid") == 701]
    for name, level in (("cuGraphLaunch (CudaGraph:6)", "runtime"), ("PjitFunction(train_step)", "op"),
                        ("train", "user")):
        calls = [e for e in host if e.get("name") == name]
        r = whole[(level, name)]
        assert r["calls"] == len(calls)
        assert abs(r["cpu_total_ns"] - sum(dur_ns(e) for e in calls)) <= len(calls)
    # the GPU time of the graph launches: their nodes, by correlation id
    corr = {e["args"]["correlation_id"] for e in host if e.get("name") == "cuGraphLaunch (CudaGraph:6)"}
    nodes = [e for e in ev if e.get("ph") == "X" and e.get("pid") == 1 and e.get("args", {}).get("correlation_id") in corr]
    g = whole[("runtime", "cuGraphLaunch (CudaGraph:6)")]
    assert g["kernels"] == len(nodes)
    assert abs(g["gpu_self_ns"] - sum(dur_ns(e) for e in nodes)) <= len(nodes)
    assert whole[("user", "train")]["gpu_total_ns"] == g["gpu_total_ns"]


# -- memory_headroom bounded by what the data shows ------------------------------------------

def raw_memory_scale(doc, start, end):
    """(start allocated, peak allocated, (0.9 x device - start) / (peak - start)) from the trace's
    CUDA [memory] events in [start, end]: memory_summary's est_batch_scale_x, recomputed."""
    mem = sorted((ns(doc, e["ts"]), e["args"]) for e in doc["traceEvents"]
                 if e.get("name") == "[memory]" and e["args"].get("Device Type") == 1)
    before = [a for t, a in mem if t <= start]
    inside = [a for t, a in mem if start <= t <= end]
    s = before[-1]["Total Allocated"] if before else inside[0]["Total Allocated"] - inside[0]["Bytes"]
    peak = max(a["Total Allocated"] for a in inside)
    total = doc["deviceProperties"][0]["totalGlobalMem"]
    return s, peak, (0.9 * total - s) / (peak - s)


def test_memory_headroom_states_no_growth_beyond_8x(tmp_path):
    """resnet18 at batch 32 on an H100: a straight line says 175x (it said "the batch might grow
    175.0x"); stated as over 8x, the figure kept as the straight line's."""
    path = DATA / "capture_h100" / "resnet18_bs32" / "resnet18_bs32.pt.trace.json.gz"
    con = db.connect(tmp_path / "m.duckdb")
    ingest_file(con, path, run="r32")
    f = _finding(con, "r32", "memory_headroom")
    s, e = con.execute("SELECT start_ns, end_ns FROM iterations WHERE run = 'r32' AND iteration = ?",
                       [f["iteration"]]).fetchone()
    con.close()
    _, _, scale = raw_memory_scale(load(path), s, e)
    assert scale > 100
    assert f["severity"] == "medium"
    assert f"memory would hold a batch over 8x larger (a straight line from this one batch size says {scale:.0f}x" in f["evidence"]
    assert "might grow" not in f["evidence"]


def test_memory_headroom_does_not_extrapolate_from_no_growth(tmp_path):
    """An eager decode step beside a preallocated 1 GiB cache (tests/data/graph_h200, H200):
    the iteration allocates 0.3 MiB beyond its 1.13 GiB; memory_summary said "a batch about
    430104.5x larger"."""
    from tracedb.query import reports
    path = G / "h200_decode_eager_mem.json.gz"
    con = db.connect(tmp_path / "m.duckdb")
    ingest_file(con, path, run="dem")
    f = _finding(con, "dem", "memory_headroom")
    s, e = con.execute("SELECT start_ns, end_ns FROM iterations WHERE run = 'dem' AND iteration = ?",
                       [f["iteration"]]).fetchone()
    m = reports.run(con, "memory_summary", {"run": "dem"}).to_pylist()[0]
    con.close()
    start, peak, scale = raw_memory_scale(load(path), s, e)
    assert scale > 1e5 and (peak - start) < 0.01 * peak
    assert (m["start_allocated_bytes"], m["peak_allocated_bytes"]) == (start, peak)
    assert m["est_batch_scale_x"] is None and "too little to tell" in m["note"]
    assert f"the iteration allocates {(peak - start) / 1048576:.1f} MiB beyond the {start / 2**30:.2f} GiB" in f["evidence"]
    assert "x larger" not in f["evidence"] and "might grow" not in f["evidence"]


def test_pageable_memcpy_severity_follows_its_share_of_the_step(sdb):
    """The decode step's one pageable DtoH copy (out.cpu(): 0.05% of the step) was medium."""
    f = _finding(sdb, "h200_graph_decode", "pageable_memcpy")
    doc = load(GRAPH_DECODE)
    n, blocked, lost, it_ns = raw_sync_cost(doc, f["iteration"])        # it_ns: the iteration
    ev = doc["traceEvents"]
    marker = next(e for e in ev if e.get("name") == f"ProfilerStep#{f['iteration']}" and e.get("cat") == "user_annotation")
    s, m = ns(doc, marker["ts"]), ns(doc, marker["ts"]) + dur_ns(marker)
    launches = {e["args"]["correlation"] for e in ev if e.get("ph") == "X" and e.get("cat") == "cuda_runtime"
                and s <= ns(doc, e["ts"]) <= m}
    copies = [e for e in ev if e.get("cat") == "gpu_memcpy" and "Pageable" in e["name"]
              and e["args"].get("correlation") in launches]
    assert len(copies) == 1
    assert f["value"] == pytest.approx(100 * dur_ns(copies[0]) / it_ns, abs=1e-3)
    assert f["value"] < 0.5 and f["severity"] == "low"
    # the cause large: the slow loader at batch 256, 1.8% of the step: medium
    g = _finding(sdb, "loader_slow_bs256", "pageable_memcpy")
    assert g["value"] > 0.5 and g["severity"] == "medium"


@pytest.fixture(scope="module")
def forced_dbs(tmp_path_factory):
    """(the ResNet-50 trace with GPT-2's ncu report paired by --force, the trace alone,
    % of the matched kernels whose names disagree)."""
    import shutil
    from tracedb import cli
    d = tmp_path_factory.mktemp("forced")
    alone, forced = str(d / "alone.duckdb"), str(d / "forced.duckdb")
    assert cli.main(["ingest", str(RESNET_TRACE), "--db", alone]) == 0
    shutil.copy(alone, forced)
    assert cli.main(["ingest", str(GPT_NCU), "--pair-with", RESNET, "--force-pair", "--db", forced]) == 0
    con = db.connect(forced, read_only=True)
    (bad, n), = con.execute("SELECT count(*) FILTER (name_score < 1), count(*) FROM matches").fetchall()
    con.close()
    assert bad > 0.2 * n
    return forced, alone, 100 * bad / n


FORCED_SAYS = ("FORCED pairing: ncu run h100_gpt2_bs8_amp_ncu_raw_baseunits is paired with "
               "h100_resnet50_bs64_amp by --force ({:.1f}% of its matched kernels have another name")


def _rows_or_error(con, name, params):
    from tracedb.query import reports
    try:
        t = reports.run(con, name, params)
    except reports.ReportError as e:
        return None, str(e)
    return t, sorted(map(repr, t.to_pylist()))


def test_every_report_whose_rows_come_from_a_forced_pairing_says_so(forced_dbs):
    """Each saved report run on the trace with and without the foreign ncu report: every
    report whose rows differ (they read its counters) carries the caveat, and none whose
    rows are the same does; those the brief names among them."""
    from tracedb.query import reports
    forced, alone, pct = forced_dbs
    a, b = db.connect(forced, read_only=True), db.connect(alone, read_only=True)
    differ, said = set(), set()
    for name, rep in sorted(reports.all_reports().items()):
        if rep.prepared_by or rep.param("job") is not None and rep.param("run") is None:
            continue
        params = {"run": RESNET} if rep.param("run") is not None else {}
        t, got = _rows_or_error(a, name, params)
        _, without = _rows_or_error(b, name, params)
        if t is not None and got != without:       # rows (not two refusals) that the pairing changed
            differ.add(name)
        if t is not None and reports.caveat_of(t):
            said.add(name)
            assert reports.caveat_of(t).startswith(FORCED_SAYS.format(pct)), name
    a.close(), b.close()
    assert differ <= said, differ - said
    assert {"utilization_levels", "kernel_utilization", "kernel_metrics", "occupancy", "tc_issue_cdf",
            "level_distributions", "utilization_by_layer", "top_kernels", "match_quality"} <= said
    # what reads no counter says nothing: the GPU time, the energy split by kernel time
    assert not said & {"gpu_utilization", "time_breakdown", "kernel_energy", "launch_queue", "overview"}


def test_a_forced_pairing_is_flagged_in_the_findings_the_cli_and_the_html_report(forced_dbs, tmp_path, capsys):
    from tracedb.analysis import advise
    from tracedb import cli
    forced, _, pct = forced_dbs
    con = db.connect(forced, read_only=True)
    got = {f["rule"]: f for f in advise.evaluate(con, RESNET)}
    con.close()
    assert got["unmatched_kernels"]["evidence"].startswith("[" + FORCED_SAYS.format(pct))
    assert not got["host_bound"]["evidence"].startswith("[FORCED")      # no ncu counters in it
    capsys.readouterr()
    assert cli.main(["query", "utilization_levels", "--run", RESNET, "--db", forced, "--format", "csv"]) == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("tracedb: caveat: " + FORCED_SAYS.format(pct))
    assert cli.main(["query", "gpu_utilization", "--run", RESNET, "--db", forced, "--format", "csv"]) == 0
    assert "caveat" not in capsys.readouterr().err
    from tracedb.api import connect
    t = connect(forced)
    r = t.query("utilization_levels", run=RESNET)
    assert r.caveat.startswith(FORCED_SAYS.format(pct)) and f"caveat: {r.caveat}" in repr(r)
    assert t.query("gpu_utilization", run=RESNET).caveat is None
    out = tmp_path / "r.html"
    assert cli.main(["report", "--db", forced, "--run", RESNET, "-o", str(out)]) == 0
    import html as h
    page = out.read_text()
    for sid in ("utilization_levels", "utilization_by_layer", "top_kernels"):
        section = page[page.index(f'<section id="{sid}">'):]
        section = section[:section.index("</section>")]
        assert "caveat: " + h.escape(FORCED_SAYS.format(pct)) in section, sid
    for sid in ("launch_queue", "energy_summary"):
        if f'<section id="{sid}">' in page:
            section = page[page.index(f'<section id="{sid}">'):]
            assert "caveat:" not in section[:section.index("</section>")], sid


def test_a_sound_pairing_beside_the_forced_one_silences_what_uses_it(forced_dbs, tmp_path):
    """With ResNet-50's own ncu report paired too, the utilization reports read it and say
    nothing; kernel_metrics, which lists every pairing, still names the forced one."""
    import shutil
    from tracedb import cli
    from tracedb.query import reports
    forced, _, pct = forced_dbs
    both = str(tmp_path / "both.duckdb")
    shutil.copy(forced, both)
    assert cli.main(["ingest", str(RESNET_NCU), "--pair-with", RESNET, "--db", both]) == 0
    con = db.connect(both, read_only=True)
    for name in ("utilization_levels", "kernel_utilization", "occupancy", "tc_issue_cdf"):
        assert reports.caveat_of(reports.run(con, name, {"run": RESNET})) is None, name
    said = reports.caveat_of(reports.run(con, "kernel_metrics", {"run": RESNET}))
    assert said.startswith(FORCED_SAYS.format(pct)) and "not the pairing the utilization reports use" in said
    own = reports.run(con, "kernel_metrics", {"run": RESNET, "ncu_run": "h100_resnet50_bs64_amp_raw_baseunits"})
    assert reports.caveat_of(own) is None
    con.close()


def test_graph_launches_report_gaps_between_replays(gdb):
    from tracedb.query import reports
    doc = load(GRAPH_DECODE)
    raw = raw_graph_launches(doc, {"ProfilerStep#3"})
    spans = sorted((min(ns(doc, n["ts"]) for n in nodes), max(ns(doc, n["ts"]) + dur_ns(n) for n in nodes))
                   for _, nodes in raw.values())
    rows = reports.run(gdb, "graph_launches", {"run": "gdecode", "iteration": "3"}).to_pylist()
    assert len(rows) == len(spans) == 32
    for r, prev, cur in zip(rows[1:], spans, spans[1:]):
        assert r["gap_before_ns"] == cur[0] - prev[1]


def test_tiny_kernels_value_is_the_gpu_time_their_launches_cost(diff_db):
    """Valued and graded by the time the GPU sat idle while the tiny kernels' streams waited
    for their launch calls (it was the share of kernels that are tiny: 45% and 43% here):
    the eager GPT step on the H200 (high, 36% of the step) against the same step compiled
    (high too, 23%: fewer kernels, but each still launched one by one), and the ResNet-50
    whose GPU work hides its 28% tiny kernels (0.04% of a 3 s step: ok)."""
    import tests.independent as ref
    con = db.connect(diff_db, read_only=True)
    for run, path in (("eager", G / "h200_gpt_eager.json.gz"), ("compiled", G / "h200_gpt_compiled.json.gz")):
        f = _finding(con, run, "tiny_kernels")
        it_ns = con.execute("SELECT dur_ns FROM iterations WHERE run = ? AND iteration = ?", [run, f["iteration"]]).fetchone()[0]
        tiny, waited, lost = ref.tiny_kernel_idle(load(path), f["iteration"])
        assert f"{tiny} of " in f["evidence"]
        assert f["value"] == pytest.approx(100 * lost / it_ns, abs=1e-3)
        assert f"the GPU sat idle {lost / 1e6:.3f} ms waiting for their launches, {100 * lost / it_ns:.2f}%" in f["evidence"]
        assert f"their streams waited {waited / 1e6:.3f} ms in all" in f["evidence"]
        assert f["severity"] == "high" and f["value"] > 20
    con.close()


def test_tiny_kernels_hidden_behind_gpu_work_cost_nothing(sdb):
    """The cause absent: 251 of the 891 kernels of the H200 ResNet-50 step are shorter than
    their launch call, but the GPU idles 1.2 ms of the 3 s step waiting for them."""
    import tests.independent as ref
    f = _finding(sdb, "resnet50_bs2176", "tiny_kernels")
    doc = load(DATA / "capture_h200" / "resnet50_bs2176" / "resnet50_bs2176.pt.trace.json.gz")
    tiny, _, lost = ref.tiny_kernel_idle(doc, f["iteration"])
    it_ns = sdb.execute("SELECT dur_ns FROM iterations WHERE run = 'resnet50_bs2176' AND iteration = ?",
                        [f["iteration"]]).fetchone()[0]
    assert tiny > 200 and f"{tiny} of " in f["evidence"]
    assert f["value"] == pytest.approx(100 * lost / it_ns, abs=1e-3) and f["value"] < 0.1
    assert f["severity"] == "ok"


def test_xla_command_buffer_launches_are_graph_launches(gdb):
    """JAX's step is one cuGraphLaunch of XLA's command buffer: its first node starts before
    the call returns (a negative launch delay), as the raw trace shows."""
    doc = load(JAX)
    ev = doc["traceEvents"]
    want = []
    for c in (e for e in ev if e.get("ph") == "X" and str(e.get("name")).startswith("cuGraphLaunch")):
        nodes = [e for e in ev if e.get("pid") == 1 and e.get("ph") == "X"
                 and e.get("args", {}).get("correlation_id") == c["args"]["correlation_id"]]
        want.append((ns(doc, c["ts"]), len(nodes), min(ns(doc, n["ts"]) for n in nodes) - (ns(doc, c["ts"]) + dur_ns(c))))
    got = gdb.execute("SELECT launch_ts_ns, nodes, launch_delay_ns FROM graph_launches WHERE run = 'jax' "
                      "ORDER BY launch_ts_ns").fetchall()
    assert len(got) == len(want) == 4
    for (t, n, d), (wt, wn, wd) in zip(got, sorted(want)):
        assert n == wn and abs(t - wt) <= 1 and abs(d - wd) <= 2
    assert all(d < 0 for _, _, d in got)


# -- every rule's value is a GPU-time cost, or says its own unit ----------------------------

# rules about something else than time the GPU lost: their unit is what they measure
OWN_UNITS = {"memory_headroom": "% of device memory", "high_static_energy": "% of the energy",
             "energy_sources_disagree": "% of the counter's energy in the window",
             "sensor_window_too_short": "x the sensor update period",
             "unmatched_kernels": "% of kernel time"}          # the counters' coverage, not a cost


def test_every_rule_values_gpu_time_or_says_its_own_unit():
    """A share of kernels, launches or kernel time stood in for a cost in four rules
    (tiny_kernels, fusion_candidates, layout_conversions, no_tensor_cores) and an overlap
    or issue ratio in two (low_comm_overlap, low_issue_efficiency): each rule's value is now
    a share of the iteration (the step) that the GPU lost or spends on the cause."""
    from tracedb.analysis import advise
    rules = advise.all_rules()
    for name, r in rules.items():
        if name in OWN_UNITS:
            assert r.unit == OWN_UNITS[name], name
        else:
            assert r.unit.startswith(("% of the iteration", "% of the step")) and r.fires == "above", (name, r.unit)
    assert set(OWN_UNITS) < set(rules) and len(rules) - len(OWN_UNITS) >= 11


# -- graph-aware host_bound; NCCL kernels of every multi-GPU capture --------------------------

def test_host_bound_on_a_graph_step_says_what_is_left(gdb):
    """The decode step replays one graph 32 times: host_bound says the step already runs as
    graphs, with the launch calls' time and the kernels launched one by one, as the raw
    trace shows."""
    f = _finding(gdb, "gdecode", "host_bound")
    doc = load(GRAPH_DECODE)
    raw = raw_graph_launches(doc, {f"ProfilerStep#{f['iteration']}"})
    nodes = sum(1 for _, ns_ in raw.values() for n in ns_ if n.get("cat") == "kernel")
    call_us = sum(dur_ns(c) for c, _ in raw.values()) / 1e3
    assert len(raw) == 32
    (kernels,) = gdb.execute("SELECT count(*) FROM kernels WHERE run = 'gdecode' AND iteration = ? AND kind = 'kernel'",
                             [f["iteration"]]).fetchone()
    pct = 100.0 * nodes / kernels
    assert (f"the step already runs {pct:.1f}% of its kernels as 32 CUDA graph launch(es): the idle is host "
            f"time around them ({call_us:.1f} us in the launch calls, {kernels - nodes} kernels launched one by one)"
            ) in f["evidence"]


@pytest.mark.parametrize("job,collectives", [("ddp", {"AllReduce"}), ("fsdp", {"AllGather", "ReduceScatter"}),
                                             ("ddp_overlap", {"AllReduce", "Broadcast"}),
                                             ("tp2dp2", {"AllGather", "AllReduce", "ReduceScatter"}),
                                             ("pp2", {"SendRecv"})])
def test_nccl_kernels_of_every_multi_gpu_capture_are_communication(tmp_path, job, collectives):
    """all-reduce, all-gather, reduce-scatter, broadcast, send/recv: every kernel whose name
    is NCCL's in the raw JSON of rank 0 is typed communication, and no other kernel is."""
    path = DATA / "dist" / job / "rank0.json.gz"
    ev = load(path)["traceEvents"]
    nccl = [e for e in ev if e.get("ph") == "X" and e.get("cat") == "kernel" and str(e.get("name")).startswith("nccl")]
    con = db.connect(tmp_path / "n.duckdb")
    ingest_file(con, path, run="r0")
    got = con.execute("SELECT count(*) FILTER (k.name LIKE 'nccl%'), count(*) FILTER (k.name NOT LIKE 'nccl%') "
                      "FROM kernels k JOIN kernel_layers l USING (run, kernel_id) "
                      "WHERE k.kind = 'kernel' AND l.layer_type = 'communication'").fetchone()
    con.close()
    import re
    assert {re.match(r"nccl(?:Dev)?Kernel_([A-Za-z]+)", e["name"]).group(1) for e in nccl} == collectives
    assert got == (len(nccl), 0)


def test_a_small_unrelated_ncu_report_is_not_autopaired(tmp_path, capsys):
    """A 42-kernel ncu report of another model (the H200 small CNN) ingested beside the
    only trace (ResNet-50): most of its kernel names are not the trace's (raw files), and
    it is loaded unpaired; utilization_levels keeps saying no ncu run is matched."""
    from tracedb import cli
    from tracedb.query import reports
    small = DATA / "ncu" / "h200_small_cnn_raw_baseunits.csv.gz"
    assert _names_known(small, RESNET_TRACE) < 80
    d = str(tmp_path / "s.duckdb")
    assert cli.main(["ingest", str(RESNET_TRACE), "--db", d]) == 0
    capsys.readouterr()
    assert cli.main(["ingest", str(small), "--db", d]) == 0
    out = capsys.readouterr().out
    assert "not paired with h100_resnet50_bs64_amp (the only trace in the database)" in out
    con = db.connect(d, read_only=True)
    assert con.execute("SELECT count(*) FROM match_runs").fetchone()[0] == 0
    (u,) = reports.run(con, "utilization_levels", {"run": RESNET}).to_pylist()
    con.close()
    assert u["ncu_run"] is None and "no ncu run matched" in u["note"]


def test_a_chart_of_counters_from_a_forced_pairing_says_so(forced_dbs):
    """The charts of the counter reports carry the caveat as their subtitle; the GPU
    utilization chart, which reads no counter, does not."""
    import json
    from tracedb.present import charts
    forced, _, pct = forced_dbs
    con = db.connect(forced, read_only=True)
    for name in ("levels", "kernel_issue", "layers"):
        spec = json.dumps(charts.build(con, name, {"run": RESNET}).to_dict())
        assert "caveat: " + FORCED_SAYS.format(pct) in spec, name
    assert "caveat" not in json.dumps(charts.build(con, "utilization", {"run": RESNET}).to_dict())
    con.close()


def test_fusion_candidates_on_the_eager_step_and_not_once_compiled(diff_db):
    """The same GPT step on the H200: eager, its layer-norm / GELU chains repeat (reduce ->
    elementwise -> elementwise, 24 times, 15% of the step: high); torch.compile fuses them
    (its most repeated short sequence takes 1.5% of the step: ok). Values against the raw
    JSON (tests/test_new_rules.py's reading of the sequences)."""
    from test_new_rules import iteration_ns, steady_kernels, top_sequence
    import tests.independent as ref
    con = db.connect(diff_db, read_only=True)
    got = {}
    for run in ("eager", "compiled"):
        doc = load(G / f"h200_gpt_{run}.json.gz")
        f = _finding(con, run, "fusion_candidates")
        assert f["iteration"] == ref.steady_step(doc)
        n, launches, span = top_sequence(steady_kernels(doc))
        assert f["value"] == pytest.approx(100.0 * span / iteration_ns(doc) if n >= 8 else 0.0, abs=1e-3)
        got[run] = f
    con.close()
    assert got["eager"]["severity"] == "high" and got["eager"]["value"] > 10
    assert got["compiled"]["severity"] == "ok" and got["compiled"]["value"] < 2
