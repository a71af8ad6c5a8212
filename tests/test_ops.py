"""The ops report against key_averages computed independently from the raw JSON:
the event tree built per thread with a stack (torch's EventList algorithm: sort by
start, longer first), GPU activity joined to its launch through the correlation id."""
import gzip
import json
from collections import defaultdict
from decimal import Decimal

import pytest

from tracedb.store import sql
from tracedb.query import reports
from tracedb.ingest import ingest_file

from conftest import DATA, TORCH, run_name

H200 = sorted((DATA / "torch_h200").glob("*.json.gz"))
LEVELS = {"cpu_op": "op", "operator": "op", "user_annotation": "user", "cuda_runtime": "runtime",
          "cuda_driver": "runtime", "runtime": "runtime", "driver": "runtime", "python_function": "python"}
GPU = {"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"}


def ns(v):
    return int((Decimal(str(v)) * 1000).to_integral_value())


def key_averages(path):
    """{(iteration, level, name): (calls, cpu_total, cpu_self, gpu_total, gpu_self, kernels)} of a
    Kineto trace, from the raw events; iteration None is the whole trace."""
    with gzip.open(path, "rt") as f:
        doc = json.load(f, parse_float=Decimal)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    cpu, gpu_by_corr = [], defaultdict(list)
    for i, e in enumerate(events):
        if e.get("ph") != "X" or "ts" not in e or "dur" not in e:
            continue
        cat = str(e.get("cat", "")).lower()
        if cat in LEVELS:
            cpu.append({"i": i, "level": LEVELS[cat], "name": e.get("name"), "thread": (str(e.get("pid")), str(e.get("tid"))),
                        "s": ns(e["ts"]), "e": ns(e["ts"]) + ns(e["dur"]), "dur": ns(e["dur"]), "corr": (e.get("args") or {}).get("correlation")})
        elif cat in GPU and (e.get("args") or {}).get("correlation") is not None:
            gpu_by_corr[e["args"]["correlation"]].append(ns(e["dur"]))
    # the tree: per thread, sorted by start then longer first (then file order); a stack of open events
    parent = {}
    by_thread = defaultdict(list)
    for c in cpu:
        by_thread[c["thread"]].append(c)
    for evs in by_thread.values():
        stack = []
        for c in sorted(evs, key=lambda c: (c["s"], -c["e"], c["i"])):
            while stack and not (stack[-1]["s"] <= c["s"] and stack[-1]["e"] >= c["e"]):
                stack.pop()
            parent[c["i"]] = stack[-1] if stack else None
            stack.append(c)
    child_ns, gpu_self, gpu_total, n_total = defaultdict(int), defaultdict(int), defaultdict(int), defaultdict(int)
    for c in cpu:
        p = parent[c["i"]]
        if p is not None:
            child_ns[p["i"]] += c["dur"]
        if c["level"] == "runtime" and c["corr"] in gpu_by_corr:
            durs = gpu_by_corr[c["corr"]]
            gpu_self[c["i"]] += sum(durs)
            if p is not None:
                gpu_self[p["i"]] += sum(durs)
            a = c
            while a is not None:
                gpu_total[a["i"]] += sum(durs)
                n_total[a["i"]] += len(durs)
                a = parent[a["i"]]
    steps = [(int(c["name"].split("#")[1]), c["s"], c["e"]) for c in cpu
             if c["level"] == "user" and str(c["name"]).startswith("ProfilerStep#")]
    out = defaultdict(lambda: [0] * 6)
    for c in cpu:
        its = [n for n, s, e in steps if s <= c["s"] < e]
        for scope in ([max(its)] if its else []) + [None]:
            row = out[(scope, c["level"], c["name"])]
            for k, v in enumerate((1, c["dur"], c["dur"] - child_ns[c["i"]], gpu_total[c["i"]],
                                   gpu_self[c["i"]], n_total[c["i"]])):
                row[k] += v
    return {k: tuple(v) for k, v in out.items()}


@pytest.fixture(scope="module")
def ops_db(fixture_db, tmp_path_factory):
    for p in H200:
        ingest_file(fixture_db, p)
    return fixture_db


@pytest.mark.parametrize("path", TORCH + H200, ids=run_name)
def test_ops_equal_key_averages_from_the_raw_json(ops_db, path):
    table = reports.run(ops_db, "ops", {"run": run_name(path), "iteration": "all"})
    got = {(r["iteration"], r["level"], r["name"]):
           (r["calls"], r["cpu_total_ns"], r["cpu_self_ns"], r["gpu_total_ns"], r["gpu_self_ns"], r["kernels"])
           for r in table.to_pylist()}
    want = key_averages(path)
    assert len(got) == table.num_rows
    assert got == want
    # what the comparison covers: ops with GPU time, several levels, whole trace and an iteration
    assert {k[1] for k in want} >= {"op", "user", "runtime"}
    assert any(v[4] > 0 for k, v in want.items() if k[1] == "op")
    assert {k[0] for k in want} - {None}
    assert all(r["cpu_self_ns"] <= r["cpu_total_ns"] and r["gpu_self_ns"] <= r["gpu_total_ns"]
               for r in table.to_pylist())


def test_ops_default_is_the_steady_iteration_and_a_missing_one_is_an_error(ops_db):
    run = "h100_resnet50_bs64_amp"
    steady = sql.scalar(ops_db, "SELECT iteration FROM iteration_steadiness WHERE run = ? AND steady", [run])
    rows = reports.run(ops_db, "ops", {"run": run}).to_pylist()
    assert rows and {r["iteration"] for r in rows} == {steady}
    with pytest.raises(reports.ReportError, match="has no iteration 99 .its iterations: 2"):
        reports.run(ops_db, "ops", {"run": run, "iteration": "99"})
    with pytest.raises(reports.ReportError, match="iteration must be an iteration number or all"):
        reports.run(ops_db, "ops", {"run": run, "iteration": "steady"})



def test_ops_on_an_xprof_trace_reads_its_host_events(ops_db):
    """XProf traces carry no cpu_op / user_annotation / runtime categories: their host
    TraceMe events (a /host: process) are the ops (issue 50; it refused them)."""
    rows = reports.run(ops_db, "ops", {"run": "cpu_async_lenet_bs64"}).to_pylist()
    assert rows and {r["level"] for r in rows} <= {"op", "user", "runtime", "python"}
    assert any(r["name"] == "EagerExecute" for r in rows)
