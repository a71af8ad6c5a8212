"""what_if checked against runs that make the change for real: the A/B pairs of
tests/data/whatif (manifest.json: each pair's A and B traces, the change, the
what_if parameters that model it, and the median steady step time measured in
each trace's profiled steps). For each pair the what_if on A predicts B's step
time as A's measured step minus the predicted saving (median over A's profiled
iterations); the saving is what the replay computes, applied to the step time as
the manifest measures it (ProfilerStep markers), so both sides use one definition
of the step.

Where a pair is not within 5%, its looser bound is asserted and says why
(docs/method.md, "Critical path and what-if", Validation)."""
import json
import statistics

import pytest

from conftest import DATA
from tracedb.cli import main
from tracedb.query import reports
from tracedb.store import db

WHATIF = DATA / "whatif"
MANIFEST = json.loads((WHATIF / "manifest.json").read_text())
BY_NAME = {m["name"]: m for m in MANIFEST}

# Pairs the model does not reach within 5%, with the bound asserted and why.
LOOSER = {
    # A blocking sync after each layer slows the CPU work after it: the same ops take
    # 1.45x longer in A (aten::linear 1.31 ms a step against 0.89 ms in B), so the
    # replay, which keeps A's CPU durations, finds A's CPU (4.7 ms) on the path where
    # B is GPU-bound (3.43 ms).
    "sync": 0.45,
    # B's single cudaGraphLaunch costs 133 us of CPU and 139 us to its first node
    # (160 nodes); zero_launch_overhead zeroes launch costs, so it predicts the kernels
    # back to back (1.78 ms) and misses that call.
    "graph": 0.15,
    # One rank's view (rank 0, the rank that waited): the wait for rank 1 removed
    # from its all-reduce. B's step also loses rank 1's own 20 ms sleep, which rank 0
    # cannot see, and its natural skew differs (tests/data/dist/README.md).
    "dist_ddp": 0.20,
}
# Pairs not predicted: the 4-rank FSDP2 job runs its host ~54 ms ahead of the GPU
# (launch calls of one step land in the previous one's GPU time), the profiled A
# is only 7.7% longer than B, and two steps a rank are too few for a median.
SKIPPED = {"dist_tp2dp2"}


@pytest.fixture(scope="module")
def con(tmp_path_factory):
    path = tmp_path_factory.mktemp("whatif") / "whatif.duckdb"
    for m in MANIFEST:
        if m["name"] in SKIPPED:
            continue
        a = WHATIF / m["a"]
        if m["a"].startswith(".."):
            assert main(["ingest", str(a.resolve()), "--db", str(path), "--job", m["name"]]) == 0
        else:
            assert main(["ingest", str(a), "--db", str(path), "--run", m["name"]]) == 0
    c = db.connect(path)
    yield c
    c.close()


def _run_of(con, m):
    """The run a pair's what_if reads: the trace, or a job's rank 0 (the one that waited)."""
    if m["a"].startswith(".."):
        return con.execute("SELECT run FROM runs WHERE job = ? AND rank = 0", [m["name"]]).fetchone()[0]
    return m["name"]


def predicted(con, m, params=None):
    rows = reports.run(con, "what_if", {"run": _run_of(con, m), "iteration": "all",
                                        **(m["what_if"] if params is None else params)}).to_pylist()
    steps = [r for r in rows if r["category"] is None]
    assert steps, m["name"]
    return m["a_step_ns"] - statistics.median(r["saving_ns"] for r in steps), steps


@pytest.mark.parametrize("name", [m["name"] for m in MANIFEST if m["name"] not in SKIPPED])
def test_prediction_matches_measured_b(con, name):
    m = BY_NAME[name]
    pred, _ = predicted(con, m)
    err = abs(pred - m["b_step_ns"]) / m["b_step_ns"]
    bound = LOOSER.get(name, 0.05)
    assert err <= bound, f"{name}: predicted {pred / 1e6:.3f} ms, measured B {m['b_step_ns'] / 1e6:.3f} ms"
    # the change is predicted as a saving, never as a loss
    assert pred < m["a_step_ns"]


def test_median_error_over_pairs_within_5pct(con):
    errs = []
    for m in MANIFEST:
        if m["name"] in SKIPPED:
            continue
        pred, _ = predicted(con, m)
        errs.append(abs(pred - m["b_step_ns"]) / m["b_step_ns"])
    assert statistics.median(errs) <= 0.05, errs


@pytest.mark.parametrize("params", [{"scale": 0.5, "kernel_like": "no kernel has this name%"},
                                    {"remove_cpu_like": "no range has this name"},
                                    {"scale": 0.5, "op_like": "aten::no_such_op"}])
def test_no_false_savings(con, params):
    """A change that touches nothing predicts each iteration's measured step exactly."""
    for name in ("loader", "item", "graph"):
        m = BY_NAME[name]
        _, steps = predicted(con, m, params)
        measured = dict(con.execute("SELECT iteration, dur_ns FROM iterations WHERE run = ?", [name]).fetchall())
        assert len(steps) == len(measured)
        for r in steps:
            assert r["predicted_step_ns"] == r["step_ns"] == measured[r["iteration"]]
            assert r["saving_ns"] == 0 and r["changed_kernels"] == 0


def test_scale_selects_only_the_named_kernel(con):
    """scale's selection: the pair's GEMM is the one nvjet kernel a step; scale=1
    changes nothing, and a pattern for it selects exactly one kernel per iteration."""
    m = BY_NAME["scale"]
    rows = reports.run(con, "what_if", {"run": "scale", "iteration": "all", "scale": 1.0,
                                        "kernel_like": "nvjet%"}).to_pylist()
    n_it = con.execute("SELECT count(*) FROM iterations WHERE run = 'scale'").fetchone()[0]
    per_it = dict(con.execute("SELECT iteration, count(*) FROM kernels WHERE run = 'scale' AND name LIKE 'nvjet%' "
                              "GROUP BY 1").fetchall())
    assert len(rows) == n_it
    for r in rows:
        assert r["saving_ns"] == 0 and r["changed_kernels"] == per_it[r["iteration"]] == 1
    assert m["what_if"]["kernel_like"] == "nvjet%"


def test_advise_ranks_by_predicted_saving(con):
    """advise adds what_if's predicted saving to the findings it models (the same
    number as the what_if report for that iteration) and orders the findings of one
    severity by it; a finding it does not model gets none."""
    from tracedb.analysis import advise
    for name in ("loader", "item"):
        found = [f for f in advise.evaluate(con, name) if f["severity"] in ("high", "medium", "low")]
        assert found
        modeled = [f for f in found if "predicts" in f["evidence"]]
        assert modeled, name
        for f in modeled:
            params = advise_params(f["rule"])
            got = reports.run(con, "what_if", {"run": name, "iteration": str(f["iteration"]), **params}).to_pylist()
            saving = next(r["saving_ns"] for r in got if r["category"] is None)
            assert f"predicts {saving / 1e6:.2f} ms saved" in f["evidence"]
        for f in found:
            assert ("predicts" in f["evidence"]) == (f["rule"] in advise_rules())
        for sev in ("high", "medium", "low"):
            savings = [float(f["evidence"].split("predicts ")[1].split(" ms")[0])
                       for f in found if f["severity"] == sev and "predicts" in f["evidence"]]
            assert savings == sorted(savings, reverse=True)
    loader = [f for f in advise.evaluate(con, "loader") if f["rule"] == "data_loader_wait"]
    assert loader and loader[0]["severity"] == "high" and "what_if (remove_cpu_like=enumerate(DataLoader)%)" \
        in loader[0]["evidence"]


def advise_params(rule):
    from tracedb.analysis import critpath
    return critpath.RULE_WHAT_IF[rule]


def advise_rules():
    from tracedb.analysis import critpath
    return set(critpath.RULE_WHAT_IF)


def test_job_replay_dist_ddp(con):
    """The same pair replayed as a job (job=): the collectives' edges across the ranks,
    rank 1's arrivals no longer gating, rank 1 taken to keep pace with rank 0. Its
    prediction is as far from B as rank 0's view (the bound of LOOSER, same reason)."""
    m = BY_NAME["dist_ddp"]
    rows = reports.run(con, "what_if", {"job": "dist_ddp", "iteration": "all", **m["what_if"]}).to_pylist()
    steps = [r for r in rows if r["category"] is None]
    assert len(steps) == 2 and all(r["job"] == "dist_ddp" and r["run"] is None for r in steps)
    pred = m["a_step_ns"] - statistics.median(r["saving_ns"] for r in steps)
    assert abs(pred - m["b_step_ns"]) / m["b_step_ns"] <= LOOSER["dist_ddp"]
    # nothing changed: the job's measured step (first start to last end over its ranks)
    same = reports.run(con, "what_if", {"job": "dist_ddp", "iteration": "all", "remove_rank_lateness": "7"}).to_pylist()
    assert all(r["saving_ns"] == 0 for r in same if r["category"] is None)


def test_findings_that_model_one_what_if_share_its_prediction(fresh_db, monkeypatch):
    """host_bound and tiny_kernels both model zero_launch_overhead: on the amp trace,
    where both fire in the steady iteration, advise replays it once and gives each the
    saving the what_if report computes for that iteration on its own."""
    from conftest import AMP_TRACE
    from tracedb.analysis import advise, critpath
    from tracedb.ingest import ingest_file
    ingest_file(fresh_db, AMP_TRACE, run="amp")
    replays = []
    real_replay = critpath.replay
    monkeypatch.setattr(critpath, "replay", lambda g, change: replays.append(g) or real_replay(g, change))
    found = {f["rule"]: f for f in advise.evaluate(fresh_db, "amp") if "predicts" in f["evidence"]}
    monkeypatch.undo()
    assert {"host_bound", "tiny_kernels"} <= set(found)
    assert found["host_bound"]["iteration"] == found["tiny_kernels"]["iteration"]
    predicted = {(f["iteration"], tuple(sorted(critpath.RULE_WHAT_IF[f["rule"]].items()))) for f in found.values()}
    assert len(replays) == len(predicted) < len(found)      # one replay per iteration and what-if
    for rule in ("host_bound", "tiny_kernels"):
        f = found[rule]
        got = reports.run(fresh_db, "what_if", {"run": "amp", "iteration": str(f["iteration"]),
                                                "zero_launch_overhead": "true"}).to_pylist()
        saving = next(r["saving_ns"] for r in got if r["category"] is None)
        assert saving > 0 and f"what_if (zero_launch_overhead=true) predicts {saving / 1e6:.2f} ms saved" in f["evidence"]
