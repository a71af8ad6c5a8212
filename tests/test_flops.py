"""FLOP counting (issue 13): analytic FLOPs against torch.utils.flop_counter's
formulas recomputed from the raw traces, grouped/depthwise convolution backward
where torch is wrong, CUPTI range-profiler counters against the raw args, the
peak table, MFU and the cross-source checks."""
import gzip
import json

import pytest

import flop_reference as ref
from conftest import DATA, TORCH, raw_trace, run_name
from independent import innermost_op
from tracedb.store import db
from tracedb.query import reports
from tracedb.ingest import ingest_file
from tracedb.query.reports import ReportError

CUPTI = DATA / "cupti" / "a100_cupti_range_profiler.json.gz"
RESNET = DATA / "torch" / "h100_resnet50_bs64_amp.json.gz"


@pytest.fixture(scope="module")
def flop_db(tmp_path_factory):
    con = db.connect(tmp_path_factory.mktemp("flops") / "f.duckdb")
    for p in TORCH + [CUPTI]:
        ingest_file(con, p)
    yield con
    con.close()


def rows(table):
    return table.to_pylist()


@pytest.mark.parametrize("path", TORCH, ids=run_name)
def test_analytic_matrix_flops_equal_torch_formulas(flop_db, path):
    """Forward and backward matrix FLOPs of the steady iteration equal torch's
    flop_counter formulas applied to the raw trace (groups are 1 in these models,
    so torch's grouped-convolution error does not arise): exactly, op by op."""
    want = ref.training_flops(raw_trace(path))
    got = rows(reports.run(flop_db, "flop_utilization", {"run": run_name(path)}))
    got = [r for r in got if r["source"] == "analytic"]
    assert len(got) == 1
    assert got[0]["flops_fwd"] == want["forward"] and got[0]["flops_bwd"] == want["backward"]
    by_op = {(r["op_name"], r["pass"]): r["flops"]
             for r in rows(reports.run(flop_db, "flops_by_op", {"run": run_name(path)}))
             if r["source"] == "analytic"}
    for key, n in want["per_op"].items():
        assert by_op[key] == n, key


def test_resnet50_forward_is_the_published_4_1_gmacs(flop_db):
    """torchvision's ResNet-50 card: 4.09 GFLOPS (multiply-adds) per 224x224 image."""
    r = [r for r in rows(reports.run(flop_db, "flop_utilization", {"run": "h100_resnet50_bs64_amp"}))
         if r["source"] == "analytic"][0]
    per_image_gmacs = r["flops_fwd"] / 64 / 2 / 1e9
    assert 4.0 < per_image_gmacs < 4.2
    assert r["dtype"] == "fp16" and r["peak_tflops"] == 989.4


def test_conv_backward_ratio_is_two_but_the_first_layer(flop_db):
    """bwd/fwd of convolutions is (2 x total - first conv) / total: the first
    convolution has no input gradient (output_mask [False, True, False])."""
    doc = raw_trace(RESNET)
    convs = [e for e in doc["traceEvents"] if e.get("name") == "aten::convolution"]
    fl = [ref.op_flops(e) for e in convs]
    first = min(convs, key=lambda e: e["ts"])
    want = (2 * sum(fl) - ref.op_flops(first)) / sum(fl)
    r = [r for r in rows(reports.run(flop_db, "bwd_fwd_ratio", {"run": "h100_resnet50_bs64_amp"}))
         if r["layer_type"] == "convolution" and r["source"] == "analytic"][0]
    assert r["bwd_fwd_ratio"] == pytest.approx(want, abs=1e-3)
    assert r["note"].startswith("below 2")
    attn = [r for r in rows(reports.run(flop_db, "bwd_fwd_ratio", {"run": "h100_bert_bs16_amp"}))
            if r["layer_type"] == "attention"][0]
    assert attn["bwd_fwd_ratio"] == 2.5


# -- small synthetic traces: one op each, shapes as Kineto records them ----------

def _trace(path, ops, ranges=(), device="NVIDIA H100 80GB HBM3"):
    """A Kineto trace with a ProfilerStep, the given cpu_ops (name, dims, concrete,
    types, tid) in sequence, one kernel launch inside each, and optional CUPTI
    ranges (args) for those launches."""
    ev = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1,
           "ts": 0, "dur": 1000}]
    ts = 10
    for i, (name, dims, conc, types, tid) in enumerate(ops):
        if tid == 2:
            ev.append({"ph": "X", "cat": "cpu_op", "name": "autograd::engine::evaluate_function: XBackward0",
                       "pid": 1, "tid": 2, "ts": ts - 1, "dur": 40, "args": {}})
        ev.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": 30,
                   "args": {"Input Dims": dims, "Concrete Inputs": conc, "Input type": types,
                            "External id": i + 1}})
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": tid,
                   "ts": ts + 5, "dur": 5, "args": {"correlation": 100 + i}})
        ts += 50
    for i, args in enumerate(ranges):
        ev.append({"ph": "X", "cat": "cuda_profiler_range", "name": f"kernel{i}", "pid": 0, "tid": 0,
                   "ts": 500 + 10 * i, "dur": 5, "args": args})
    doc = {"deviceProperties": [{"id": 0, "name": device}], "traceEvents": ev}
    with gzip.open(path, "wt") as f:
        json.dump(doc, f)
    return path


def _conv(x, w, stride, pad, dil, groups, transposed=False, out_pad=None):
    dims = [x, w, [], [], [], [], [], [], []]
    conc = ["", "", "", str(stride), str(pad), str(dil), str(transposed), str(out_pad or [0] * len(stride)),
            str(groups)]
    return ("aten::convolution", dims, conc, ["c10::Half", "c10::Half"] + [""] * 7, 1)


def _conv_bwd(go, x, w, stride, pad, dil, groups, mask=(True, True, False), transposed=False):
    dims = [go, x, w] + [[]] * 8
    conc = ["", "", "", "[0]", str(stride), str(pad), str(dil), str(transposed), "[0, 0]", str(groups),
            "[" + ", ".join(str(m) for m in mask) + "]"]
    return ("aten::convolution_backward", dims, conc, ["c10::Half"] * 3 + [""] * 8, 2)


def test_depthwise_and_grouped_conv_backward_where_torch_overcounts(tmp_path):
    """MobileNetV2's depthwise 3x3 (groups = channels) and a grouped conv with
    stride, padding and dilation. tracedb: grad_input and grad_weight each cost the
    forward. torch.utils.flop_counter's grad_weight term ignores groups and counts
    groups x too much (its formula applied here as ref.conv_backward_flop), so the
    reference for the backward is the corrected formula, and the test shows both."""
    x, w = [8, 96, 56, 56], [96, 1, 3, 3]
    x2, w2 = [4, 64, 33, 33], [128, 16, 3, 3]                 # groups 4, stride 2, padding 2, dilation 2
    go = ref.conv_out_shape(x, w, [2, 2], [1, 1], [1, 1], False, [0, 0])
    go2 = ref.conv_out_shape(x2, w2, [2, 2], [2, 2], [2, 2], False, [0, 0])
    assert go == [8, 96, 28, 28] and go2 == [4, 128, 17, 17]
    ops = [_conv(x, w, [2, 2], [1, 1], [1, 1], 96), _conv(x2, w2, [2, 2], [2, 2], [2, 2], 4),
           _conv_bwd(go, x, w, [2, 2], [1, 1], [1, 1], 96), _conv_bwd(go2, x2, w2, [2, 2], [2, 2], [2, 2], 4),
           _conv_bwd(go, x, w, [2, 2], [1, 1], [1, 1], 96, mask=(False, True, False))]
    con = db.connect(tmp_path / "g.duckdb")
    ingest_file(con, _trace(tmp_path / "g.json.gz", ops))
    got = {(r[0], r[1]): r[2] for r in con.execute(
        "SELECT name, pass, list(flops ORDER BY ts_ns) FROM flop_ops GROUP BY ALL").fetchall()}
    fwd = [2 * 8 * 96 * 1 * 9 * 28 * 28, 2 * 4 * 128 * 16 * 9 * 17 * 17]
    assert got[("aten::convolution", "forward")] == fwd
    assert fwd[0] == ref.conv_flop_count(x, w, go, False)             # torch's forward is right
    bwd = got[("aten::convolution_backward", "backward")]
    assert bwd == [2 * fwd[0], 2 * fwd[1], fwd[0]]
    correct = [ref.conv_backward_flop(go, x, w, False, [True, True], False, 96),
               ref.conv_backward_flop(go2, x2, w2, False, [True, True], False, 4)]
    torch_says = [ref.conv_backward_flop(go, x, w, False, [True, True]),
                  ref.conv_backward_flop(go2, x2, w2, False, [True, True])]
    assert bwd[:2] == correct
    assert torch_says[0] == fwd[0] + 96 * fwd[0] and torch_says[1] == fwd[1] + 4 * fwd[1]
    con.close()


def test_transposed_conv_and_matmul_shapes(tmp_path):
    x, w = [2, 32, 10, 10], [32, 8, 4, 4]      # ConvTranspose2d(32, 16, 4, stride 2, groups 2): w [Cin, Cout/g, k]
    out = ref.conv_out_shape(x, w, [2, 2], [1, 1], [1, 1], True, [0, 0])
    ops = [_conv(x, w, [2, 2], [1, 1], [1, 1], 2, transposed=True),
           ("aten::bmm", [[6, 5, 7], [6, 7, 3]], ["", ""], ["c10::BFloat16"] * 2, 1),
           ("aten::baddbmm", [[6, 5, 3], [6, 5, 7], [6, 7, 3], [], []], [""] * 5, ["c10::BFloat16"] * 3, 1),
           ("aten::addmm", [[3], [5, 7], [7, 3], [], []], [""] * 5, ["float"] * 3, 1),
           ("aten::_scaled_dot_product_flash_attention", [[2, 4, 16, 8], [2, 4, 32, 8], [2, 4, 32, 8]],
            [""] * 3, ["c10::BFloat16"] * 3, 1)]
    con = db.connect(tmp_path / "t.duckdb")
    ingest_file(con, _trace(tmp_path / "t.json.gz", ops))
    got = [r[0] for r in con.execute("SELECT flops FROM flop_ops ORDER BY ts_ns").fetchall()]
    assert got == [ref.conv_flop_count(x, w, out, True), ref.bmm_flop([6, 5, 7], [6, 7, 3]),
                   ref.bmm_flop([6, 5, 7], [6, 7, 3]), ref.mm_flop([5, 7], [7, 3]),
                   ref.sdpa_flop([2, 4, 16, 8], [2, 4, 32, 8], [2, 4, 32, 8])]
    assert got[0] == 2 * 2 * 32 * 8 * 16 * 10 * 10
    con.close()


# -- CUPTI range profiler --------------------------------------------------------

def test_cupti_ranges_become_kernels_and_counters(flop_db):
    """Every cuda_profiler_range is a kernel of the trace run, paired by position
    with the cudaLaunchKernel calls (HTA's rule), its op the innermost cpu_op of
    the launch, and its args counters of the run (values as written)."""
    doc = raw_trace(CUPTI)
    ev = doc["traceEvents"]
    ranges = sorted([(e["ts"], i, e) for i, e in enumerate(ev) if e.get("cat") == "cuda_profiler_range"],
                    key=lambda r: (r[0], r[1]))
    launches = sorted([(e["ts"], i, e) for i, e in enumerate(ev)
                       if e.get("cat") == "cuda_runtime" and e["name"] == "cudaLaunchKernel"],
                      key=lambda r: (r[0], r[1]))
    assert len(ranges) == len(launches) == 77
    run = "a100_cupti_range_profiler"
    got = {r[0]: r[1:] for r in flop_db.execute(
        "SELECT kernel_id, name, correlation, launch_event_id, op_event_id FROM kernels WHERE run = ?",
        [run]).fetchall()}
    assert len(got) == 77
    for (_, i, e), (_, li, le) in zip(ranges, launches):
        assert got[i][:3] == (e["name"], le["args"]["correlation"], li)
        assert got[i][3] == innermost_op(doc, le)
    counters = {(k, m): v for k, m, v in flop_db.execute(
        "SELECT kernel_id, metric, value FROM counters WHERE run = ?", [run]).fetchall()}
    assert counters == {(i, m): float(v) for _, i, e in ranges for m, v in e["args"].items()}


def test_cupti_flops_are_hta_sass_formula(flop_db):
    """kernel_flops of the CUPTI trace: HTA's CUDA_SASS_INSTRUCTION_COUNTER_FLOPS
    (fma x2, add and mul x1) per precision, from the raw args."""
    doc = raw_trace(CUPTI)
    want = []
    for e in sorted((e for e in doc["traceEvents"] if e.get("cat") == "cuda_profiler_range"),
                    key=lambda e: e["ts"]):
        a = e["args"]
        c = lambda p: sum(a[f"smsp__sass_thread_inst_executed_op_{p}{op}_pred_on.sum"] * (2 if op == "fma" else 1)  # noqa: E731
                          for op in ("add", "mul", "fma"))
        want.append((e["name"], c("d"), c("f"), c("h")))
    got = [(r["name"], r["fp64_flops"], r["fp32_flops"], r["fp16_flops"])
           for r in rows(reports.run(flop_db, "kernel_flops", {"run": "a100_cupti_range_profiler"}))]
    assert got == want
    assert all(r["source"] == "cupti" and r["tensor_flops"] is None
               for r in rows(reports.run(flop_db, "kernel_flops", {"run": "a100_cupti_range_profiler"})))


def test_cupti_counters_feed_the_counter_views(flop_db):
    """The trace run is matched to itself: matched_kernels, kernel_levels and the
    flops_by_op cupti rows read its counters as those of a paired ncu report."""
    run = "a100_cupti_range_profiler"
    assert flop_db.execute("SELECT count(*) FROM matched_kernels WHERE run = ? AND ncu_run = ?",
                           [run, run]).fetchone()[0] == 77
    assert flop_db.execute("SELECT count(*) FROM kernel_levels WHERE run = ?", [run]).fetchone()[0] == 77
    by_op = rows(reports.run(flop_db, "flops_by_op", {"run": run}))
    cupti = {r["op_name"]: r for r in by_op if r["source"] == "cupti"}
    kf = rows(reports.run(flop_db, "kernel_flops", {"run": run}))
    assert sum(r["flops"] for r in cupti.values()) == sum(r["total_flops"] for r in kf)
    # the trace has no record_shapes: analytic counts nothing where the counters see work
    assert {r["check"] for r in by_op if r["source"] == "analytic" and r["op_name"] == "aten::convolution"} \
        == {"missing"}


def test_checks_missing_multiple_mismatch(tmp_path):
    """One mm of 2*64*32*16 FLOP per op, with CUPTI counters of the same, twice,
    and 1.3 times that work: ok, multiple_counted, mismatch."""
    mm = lambda: ("aten::mm", [[64, 32], [32, 16]], ["", ""], ["float", "float"], 1)  # noqa: E731
    n = 2 * 64 * 32 * 16
    ffma = lambda f: {"smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": f / 2}  # noqa: E731
    ops = [mm(), ("aten::bmm", [[2, 64, 32], [2, 32, 16]], ["", ""], ["float"] * 2, 1),
           ("aten::addmm", [[16], [64, 32], [32, 16], [], []], [""] * 5, ["float"] * 3, 1)]
    con = db.connect(tmp_path / "c.duckdb")
    ingest_file(con, _trace(tmp_path / "c.json.gz", ops, [ffma(n), ffma(2 * 2 * n), ffma(1.3 * n)]))
    check = {(r["op_name"], r["source"]): r["check"] for r in rows(reports.run(con, "flops_by_op", {}))}
    assert check[("aten::mm", "analytic")] == "ok" and check[("aten::mm", "cupti")] == "ok"
    assert check[("aten::bmm", "cupti")] == "multiple_counted"
    assert check[("aten::addmm", "cupti")] == "mismatch"
    con.close()


# -- peaks, MFU, batch consistency, errors ---------------------------------------

def test_peak_table_matches_devices_and_user_rows_win(tmp_path):
    con = db.connect(tmp_path / "p.duckdb")
    for name, dev in (("sxm", "NVIDIA H100 80GB HBM3"), ("pcie", "NVIDIA H100 PCIe"), ("a100", "NVIDIA A100-SXM4-80GB"),
                      ("l4", "NVIDIA L4"), ("l40s", "NVIDIA L40S"), ("b200", "NVIDIA B200"), ("v100", "Tesla V100-SXM2-16GB"),
                      ("h200", "NVIDIA H200")):
        ingest_file(con, _trace(tmp_path / f"{name}.json.gz", [], device=dev), run=name)
    peak = {(r[0], r[1]): r[2] for r in con.execute("SELECT run, dtype, peak_tflops FROM run_peak_flops").fetchall()}
    assert peak[("sxm", "bf16")] == 989.4 and peak[("pcie", "bf16")] == 756.0 and peak[("a100", "fp16")] == 312.0
    assert peak[("l4", "fp16")] == 121.0 and peak[("l40s", "fp8")] == 733.0 and peak[("b200", "bf16")] == 2250.0
    assert peak[("v100", "fp16")] == 125.0 and ("v100", "bf16") not in peak and peak[("h200", "fp8")] == 1978.9
    con.execute("INSERT INTO peak_flops VALUES ('my H100', '(?i)H100', 99, 'bf16', 700.0, 'measured', 'user')")
    assert con.execute("SELECT peak_tflops FROM run_peak_flops WHERE run = 'sxm' AND dtype = 'bf16'").fetchone()[0] == 700.0
    con.close()


def test_mfu_is_achieved_over_peak(flop_db):
    """achieved TFLOP/s over the iteration (the iterations table) and over its
    kernel-busy time; mfu against the H100 SXM fp16 peak."""
    total_ns, busy_ns = flop_db.execute(
        "SELECT dur_ns, kernel_busy_ns FROM iteration_gpu_time JOIN iterations USING (run, iteration) "
        "WHERE run = 'h100_resnet50_bs64_amp' AND iteration = 2").fetchone()
    got = rows(reports.run(flop_db, "flop_utilization", {"run": "h100_resnet50_bs64_amp", "iteration": "all"}))
    assert [r["iteration"] for r in got] == [2, None]
    for r in got:
        if r["iteration"] == 2:
            assert r["achieved_tflops"] == pytest.approx(r["flops_total"] / total_ns / 1e3, abs=1e-3)
            assert r["achieved_tflops_busy"] == pytest.approx(r["flops_total"] / busy_ns / 1e3, abs=1e-3)
            assert r["mfu_pct"] == pytest.approx(100 * r["flops_total"] / total_ns / 1e3 / 989.4, abs=0.01)


def test_batch_consistency_flags_work_that_does_not_scale(tmp_path):
    con = db.connect(tmp_path / "b.duckdb")
    for b in (4, 8):
        ops = [("aten::mm", [[b, 32], [32, 16]], ["", ""], ["float"] * 2, 1),
               ("aten::add_", [[32, 16], [32, 16], []], ["", "", "1"], ["float", "float", "Scalar"], 1)]
        ingest_file(con, _trace(tmp_path / f"m_bs{b}.json.gz", ops), run=f"m_bs{b}_fp32")
    got = {r["op_name"]: r for r in rows(reports.run(con, "flops_batch_consistency", {}))
           if r["source"] == "analytic"}
    assert got["aten::mm"]["flag"] == "consistent" and (got["aten::mm"]["min_batch"], got["aten::mm"]["max_batch"]) == (4, 8)
    assert got["aten::mm"]["max_flops_per_sample"] == 2 * 32 * 16
    assert got["aten::add_"]["flag"] == "differs" and got["aten::add_"]["spread_pct"] == 50.0
    con.close()


def test_bad_iteration_is_a_clear_error(flop_db):
    with pytest.raises(ReportError, match="flop_utilization: .*'steady'"):
        reports.run(flop_db, "flop_utilization", {"iteration": "steady"})


def test_flop_charts_draw_the_report_rows(flop_db, tmp_path):
    from tracedb.present import charts
    spec = charts.build(flop_db, "mfu", {}).to_dict()
    table = rows(reports.run(flop_db, "flop_utilization", {}))
    assert sorted(v["mfu_pct"] for v in spec["data"]["values"]) == \
        sorted(r["mfu_pct"] for r in table if r["mfu_pct"] is not None)
    spec = charts.build(flop_db, "flops_by_layer", {"run": "h100_resnet50_bs64_amp"}).to_dict()
    conv = {v["pass"]: v["gflops"] for v in spec["data"]["values"]
            if v["layer_type"] == "convolution" and v["source"] == "analytic"}
    r = [r for r in rows(reports.run(flop_db, "bwd_fwd_ratio", {"run": "h100_resnet50_bs64_amp"}))
         if r["layer_type"] == "convolution"][0]
    assert conv == {"forward": r["flops_fwd"] / 1e9, "backward": r["flops_bwd"] / 1e9}
    chart = charts.build(flop_db, "mfu", {})
    charts.save(chart, tmp_path / "mfu.svg")
    assert (tmp_path / "mfu.svg").read_text().lstrip().startswith("<svg")
