"""Rules from the trace alone (issue: easy to read): NCHW<->NHWC layout conversions
(a channels_last hint) and repeated short kernel sequences (fusion candidates),
each where its cause is present and where it is absent, the value checked against a
computation from the raw JSON; and `tracedb diff --by op`."""
import json
import re
import subprocess
import sys
from collections import Counter
from decimal import Decimal

import pytest

import independent as ref
from conftest import DATA, raw_trace
from tracedb.analysis import advise
from tracedb.store import db
from tracedb.ingest import ingest_file

AMP, FP32, BERT = "h100_resnet50_bs64_amp", "h100_resnet50_bs64_fp32", "h100_bert_bs16_amp"
GPT2, SLOW, FIXED = "h100_gpt2_bs8_amp", "loader_slow", "loader_fixed"
PATHS = {AMP: DATA / "torch" / f"{AMP}.json.gz", FP32: DATA / "torch" / f"{FP32}.json.gz",
         BERT: DATA / "torch" / f"{BERT}.json.gz", GPT2: DATA / "flops" / f"{GPT2}.json.gz",
         SLOW: DATA / "torch_loader" / "loader_slow.json.gz", FIXED: DATA / "torch_loader" / "loader_fixed.json.gz"}
CONVERSION = re.compile(r"(?i)nchw_?to_?nhwc|nhwc_?to_?nchw|nchw2nhwc|nhwc2nchw")
NOT_FUSIBLE = re.compile(r"(?i)gemm|nvjet|xmma|cutlass|cublas|conv|implicit|wgrad|dgrad|fprop|"
                         r"nchw_?to_?nhwc|nhwc_?to_?nchw|nccl")


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    p = tmp_path_factory.mktemp("rules") / "r.duckdb"
    con = db.connect(p)
    for f in PATHS.values():
        ingest_file(con, f)
    con.close()
    return p


@pytest.fixture(scope="module")
def found(path):
    con = db.connect(path, read_only=True)
    out = {run: {f["rule"]: f for f in advise.evaluate(con, run, only=["layout_conversions", "fusion_candidates"])}
           for run in PATHS}
    con.close()
    return out


@pytest.fixture(scope="module")
def docs():
    return {run: raw_trace(p) for run, p in PATHS.items()}


def steady_kernels(doc):
    """(file index, name, stream, start_ns, dur_ns) of the kernels launched in the steady step, from the JSON."""
    step = ref.steady_step(doc)
    s, m = ref.iterations(doc)[step]
    la = ref.launches(doc)
    out = []
    for i, e in ref.gpu_events(doc):
        if ref.GPU_CATS[e["cat"]] != "kernel":
            continue
        c = (e.get("args") or {}).get("correlation")
        t = ref.ns(doc, la[c][1]["ts"]) if c in la else ref.ns(doc, e["ts"])
        if s <= t <= m:
            out.append((i, e["name"], e["args"].get("stream"), ref.ns(doc, e["ts"]), int(Decimal(str(e["dur"])) * 1000)))
    return out


def iteration_ns(doc):
    """The steady iteration's length from the JSON: its marker's start to the later of the
    marker's end and the end of the last GPU activity launched inside it."""
    step = ref.steady_step(doc)
    s, m = ref.iterations(doc)[step]
    return max([m] + [b for _, _, b in ref.iteration_intervals(doc, step)]) - s


def test_layout_conversions_fire_on_resnet_and_not_without_them(found, docs):
    """Valued by the GPU time of the conversions as a share of the step (it was their
    share of kernel time)."""
    for run in PATHS:
        k = steady_kernels(docs[run])
        conv = sum(d for _, n, _, _, d in k if CONVERSION.search(n))
        f = found[run]["layout_conversions"]
        assert f["value"] == pytest.approx(100.0 * conv / iteration_ns(docs[run]), abs=1e-3), run
        if conv:
            assert f"({100.0 * conv / sum(d for *_, d in k):.1f}% of kernel time)" in f["evidence"], run
    # present: ResNet-50 (amp: 6.3% of the step, 14.7% of kernel time; the conversion kernel is
    # the second by time) and fp32 (9.3% of the step)
    assert found[AMP]["layout_conversions"]["severity"] == "medium"
    assert found[FP32]["layout_conversions"]["severity"] == "medium"
    assert 3 < found[AMP]["layout_conversions"]["value"] < found[FP32]["layout_conversions"]["value"] < 10
    assert "ranks 2 among the iteration's kernels by time" in found[AMP]["layout_conversions"]["evidence"]
    assert "channels_last" in found[AMP]["layout_conversions"]["suggestion"]
    # absent: BERT has no convolution; the DataLoader ResNet-18 (fp32, TF32 off) runs NCHW kernels (0.04%)
    assert found[BERT]["layout_conversions"]["severity"] == "ok" and found[BERT]["layout_conversions"]["value"] == 0
    assert found[SLOW]["layout_conversions"]["severity"] == "ok" and 0 < found[SLOW]["layout_conversions"]["value"] < 0.1
    # the same DataLoader ResNet-18 with AMP and channels_last: no conversion left
    assert found[FIXED]["layout_conversions"]["severity"] == "ok" and found[FIXED]["layout_conversions"]["value"] == 0


def top_sequence(kernels):
    """(count, launches, ns of GPU time of its runs) of the most repeated three-kernel
    sequence of short non-GEMM kernels, per stream (ties: the one with more kernel time);
    a run's GPU time: its first kernel's start to its third kernel's end."""
    by_stream = {}
    for i, name, stream, start, dur in sorted(kernels, key=lambda k: (k[3], k[0])):
        by_stream.setdefault(stream, []).append((name, dur < 20000 and not NOT_FUSIBLE.search(name), dur, start))
    seqs = {}
    for ks in by_stream.values():
        for a, b, c in zip(ks, ks[1:], ks[2:]):
            if a[1] and b[1] and c[1] and not (a[0] == b[0] == c[0]):
                n, t, span = seqs.get((a[0], b[0], c[0]), (0, 0, 0))
                seqs[(a[0], b[0], c[0])] = (n + 1, t + a[2] + b[2] + c[2], span + c[3] + c[2] - a[3])
    n, _, span = max(seqs.values(), default=(0, 0, 0))
    return n, len(kernels), span


def test_fusion_candidates_fire_on_transformers_and_not_on_convnets(found, docs):
    """Valued by the GPU time of the sequence's runs as a share of the step (it was their
    share of the kernel launches)."""
    for run in PATHS:
        n, launches, span = top_sequence(steady_kernels(docs[run]))
        want = 100.0 * span / iteration_ns(docs[run]) if n >= 8 else 0.0
        assert found[run]["fusion_candidates"]["value"] == pytest.approx(want, abs=1e-3), run
        assert f"ran {n} times ({3 * n} of {launches} kernel launches" in found[run]["fusion_candidates"]["evidence"]
        assert f"its runs take {span / 1e6:.3f} ms of GPU time" in found[run]["fusion_candidates"]["evidence"]
    # present: BERT and GPT-2 repeat reduce -> elementwise -> elementwise chains (layer norms, GELU,
    # dropout): 8.4% and 4.5% of their steps; the DataLoader ResNet-18 with AMP, 10.8%
    assert found[BERT]["fusion_candidates"]["severity"] == "medium" and found[GPT2]["fusion_candidates"]["severity"] == "medium"
    assert found[FIXED]["fusion_candidates"]["severity"] == "high"
    # absent: the ResNets' short kernels take little of their steps (their time is in convolutions);
    # ResNet-50 amp's batch norm -> ReLU -> add is at the edge (2.0%: low)
    for run in (FP32, SLOW):
        assert found[run]["fusion_candidates"]["severity"] == "ok", run
    assert found[AMP]["fusion_candidates"]["severity"] in ("ok", "low") and found[AMP]["fusion_candidates"]["value"] < 3


def cli(*args):
    return subprocess.run([sys.executable, "-m", "tracedb.cli", *map(str, args)], capture_output=True, text=True)


def op_gpu_self(doc):
    """op name -> GPU time launched by runtime calls whose innermost enclosing cpu_op it is (steady step)."""
    step = ref.steady_step(doc)
    s, m = ref.iterations(doc)[step]
    la = ref.launches(doc)
    out = Counter()
    ops = [(ref.ns(doc, e["ts"]), ref.ns(doc, e["ts"]) + int(Decimal(str(e["dur"])) * 1000), i, e)
           for i, e in enumerate(doc["traceEvents"])
           if e.get("ph") == "X" and e.get("cat") == "cpu_op" and Decimal(str(e.get("dur", 0))) > 0]
    for _, e in ref.gpu_events(doc):
        c = (e.get("args") or {}).get("correlation")
        if c not in la:
            continue
        launch = la[c][1]
        t = ref.ns(doc, launch["ts"])
        if not s <= t <= m:
            continue
        inner = [o for o in ops if o[3].get("tid") == launch["tid"] and o[3].get("pid") == launch["pid"]
                 and o[0] <= t <= o[1] and o[0] >= s]
        if inner:
            best = max(inner, key=lambda o: (o[0], -o[1], o[2]))
            out[best[3]["name"]] += int(Decimal(str(e["dur"])) * 1000)
    return out


def test_diff_by_op(path, docs):
    r = cli("diff", FP32, AMP, "--db", path, "--by", "op", "--format", "json")
    assert r.returncode == 0, r.stderr
    rows = {x["op"]: x for x in json.loads(r.stdout)}
    base, new = op_gpu_self(docs[FP32]), op_gpu_self(docs[AMP])
    for op in ("aten::cudnn_convolution", "aten::convolution_backward", "aten::cudnn_batch_norm"):
        assert rows[op]["base_gpu_ns"] == base[op] and rows[op]["new_gpu_ns"] == new[op], op
        assert rows[op]["delta_gpu_ns"] == new[op] - base[op]
    # sorted by the size of the change; AMP makes the convolutions faster
    deltas = [abs(x["delta_gpu_ns"]) for x in json.loads(r.stdout)]
    assert deltas == sorted(deltas, reverse=True)
    assert rows["aten::cudnn_convolution"]["verdict"] == "faster"
    assert rows["aten::_amp_foreach_non_finite_check_and_unscale_"]["verdict"] == "new"     # only in the AMP run
    # the same run against itself: nothing changed (no false alarm)
    r = cli("diff", AMP, AMP, "--db", path, "--by", "op", "--format", "json")
    same = json.loads(r.stdout)
    assert r.returncode == 0 and same and {x["verdict"] for x in same} == {"same"}
    assert all(x["delta_gpu_ns"] == 0 and x["delta_cpu_self_ns"] == 0 for x in same)
    r = cli("diff", FP32, "h100_resnet50", "--db", path, "--by", "op")
    assert r.returncode == 2 and "no trace run named 'h100_resnet50'" in r.stderr and r.stderr.count("\n") == 1
