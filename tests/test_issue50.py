"""Issue 50: findings a user acts on, checked on real H200 captures (tests/data/graph_h200)
against values computed independently from the raw files."""
import gzip
import json
from decimal import Decimal

import pytest

from tracedb import db
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
    from tracedb import reports
    by = {r["launch_name"]: r for r in reports.run(gdb, "launch_delay", {"run": run, "iteration": it, "by": "launch"}).to_pylist()}
    g = by["cudaGraphLaunch"]
    delays = sorted(w[3] for w in want)
    mid = len(delays) // 2
    median = delays[mid] if len(delays) % 2 else (delays[mid - 1] + delays[mid]) / 2
    assert g["kernels"] == len(want)
    assert abs(g["delay_ns"] - median) <= 1


def _finding(con, run, rule):
    from tracedb import advise
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
    assert f["severity"] == "medium" and f["value"] > 40
    assert "already runs" not in f["evidence"]
