"""Hardware-counted FLOPs against analytic, per op type (docs/reports.md,
"Against FlopCounterMode and the hardware"), on the H100 captures of
tests/data/flops: a GPT-2-style training step under ncu with the FLOP counters
(within 10% of analytic, each gap explained), MobileNetV2's step (depthwise
convolution and batch norm, 2.3x and 2.7x), isolated ops at its shapes with the
SASS source counters that say which instructions the counters count, and the
tensor-path counters of metric_sources across architectures (ncu's own metric
lists per chip)."""
import csv
import gzip
import json
import re
from collections import Counter

import pytest

from conftest import DATA
from tracedb.store import db
from tracedb.query import reports
from tracedb.ingest import ingest_file

FLOPS = DATA / "flops"
CHIPS = FLOPS / "ncu_chips"
GPT2 = "h100_gpt2_bs8_amp"
GPT2_NCU = FLOPS / f"{GPT2}_ncu_raw_baseunits.csv.gz"
MOBILE = "h100_mobilenet_v2_bs32_amp_ncu_pair"
MOBILE_NCU = FLOPS / "h100_mobilenet_v2_bs32_amp_ncu_raw_baseunits.csv.gz"
OPS = "h100_mobilenet_v2_ops"
OPS_NCU = FLOPS / f"{OPS}_ncu_raw_baseunits.csv.gz"
OPS_SASS = FLOPS / f"{OPS}_ncu_source_sass.csv.gz"
SASS_OPS = ("dadd", "dmul", "dfma", "fadd", "fmul", "ffma", "hadd", "hmul", "hfma")


@pytest.fixture(scope="module")
def hw_db(tmp_path_factory):
    con = db.connect(tmp_path_factory.mktemp("hw") / "hw.duckdb")
    ingest_file(con, FLOPS / f"{GPT2}.json.gz")
    ingest_file(con, GPT2_NCU, pair_with=GPT2)
    ingest_file(con, FLOPS / f"{MOBILE}.json.gz")
    ingest_file(con, MOBILE_NCU, pair_with=MOBILE)
    ingest_file(con, FLOPS / f"{OPS}.json.gz")
    ingest_file(con, OPS_NCU, pair_with=OPS)
    yield con
    con.close()


def ncu_counters(path):
    """ncu ID -> the .sum SASS and tensor-path counters, parsed from the raw CSV
    (thousands separators removed)."""
    with gzip.open(path, "rt", newline="") as f:
        rows = list(csv.reader(f))
    col = {h: i for i, h in enumerate(rows[0])}
    out = {}
    for r in rows[2:]:
        c = {op: float(r[col[f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum"]].replace(",", ""))
             for op in SASS_OPS}
        c["tensor"] = sum(float(r[i].replace(",", "")) for h, i in col.items()
                          if h.startswith("sm__ops_path_tensor_src_") and h.endswith(".sum"))
        c["name"] = r[col["Kernel Name"]]
        out[int(r[col["ID"]])] = c
    return out


def kernels_with_ops(con, run, path):
    """Every kernel of the trace run's steady step with its ncu ID's counters (from
    the CSV), the counted op it belongs to (tracedb's pairing), that op's shapes,
    concrete inputs and analytic FLOPs."""
    counters = ncu_counters(path)
    rows = con.execute("""
        SELECT k.name, mk.ncu_id, o.op_event_id, o.op_name, c.dims, c.ci, f.flops
        FROM kernel_flop_ops o
        JOIN kernels k ON k.run = o.run AND k.kernel_id = o.kernel_id
        JOIN matched_kernels mk ON mk.run = o.run AND mk.kernel_id = o.kernel_id
        LEFT JOIN flop_ops f ON f.run = o.run AND f.event_id = o.op_event_id
        LEFT JOIN flop_op_candidates c ON c.run = o.run AND c.event_id = o.op_event_id
        WHERE o.run = ? ORDER BY k.ts_ns""", [run]).fetchall()
    keys = ("kernel", "ncu_id", "op_event_id", "op", "dims", "ci", "analytic")
    return [dict(zip(keys, r), **counters[r[1]]) for r in rows]


def ints(text):
    return [int(x) for x in re.findall(r"-?\d+", text)]


def source(con, run, name):
    rows = reports.run(con, "flop_utilization", {"run": run}).to_pylist()
    return next(r for r in rows if r["source"] == name)


# -- GPT-2: a matrix-dominated step, hardware within 10% of analytic ---------------

def test_gpt2_step_hardware_flops_within_10pct_of_analytic(hw_db):
    """One training step of the GPT-2-style model (bs 8, seq 256, amp) under ncu
    with the FLOP counters only: the matrix FLOPs the hardware counted are 0.994 of
    the analytic ones, forward and backward each within 1%."""
    an, hw = source(hw_db, GPT2, "analytic"), source(hw_db, GPT2, "ncu")
    assert an["flops_total"] == 485840912384                      # = FlopCounterMode (test_flops_capture)
    for k in ("flops_fwd", "flops_bwd", "flops_total"):
        assert 0.90 <= hw[k] / an[k] <= 1.10, k
        assert hw[k] / an[k] == pytest.approx(1, abs=0.01), k
    assert hw["flops_total"] / an["flops_total"] == pytest.approx(0.9943, abs=5e-4)
    counters = ncu_counters(GPT2_NCU)
    assert len(counters) == 390 == hw_db.execute(
        "SELECT matched FROM match_runs WHERE trace_run = ?", [GPT2]).fetchone()[0]
    kf = reports.run(hw_db, "kernel_flops", {"run": f"{GPT2}_ncu_raw_baseunits"}).to_pylist()
    assert sum(r["tensor_flops"] for r in kf) == sum(c["tensor"] for c in counters.values())


def test_gpt2_matmuls_count_their_tile_padded_shapes_and_causal_attention_three_quarters(hw_db):
    """Per op, the tensor-path FLOPs: every GEMM exactly 2*M*N*K, the vocabulary
    dimension (50257) padded to the kernel's 128 or 256 tile; cuDNN's causal flash
    attention, forward and backward, exactly 3/4 of the analytic count: of the
    256x256 score matrix in 64x128 blocks, the 2 blocks wholly above the diagonal
    are skipped (analytic counts the full matrix, as FlopCounterMode does). The
    CUDA-core FLOPs in these ops (bias adds, split-K reduction, softmax) add <0.1%."""
    ops = {}
    for k in kernels_with_ops(hw_db, GPT2, GPT2_NCU):
        o = ops.setdefault(k["op_event_id"], {"op": k["op"], "dims": k["dims"], "analytic": k["analytic"],
                                              "tensor": 0, "cuda": 0})
        o["tensor"] += k["tensor"]
        o["cuda"] += sum(k[op] * (2 if op.endswith("fma") else 1) for op in SASS_OPS)
    mm = [o for o in ops.values() if o["op"] in ("aten::mm", "aten::addmm")]
    attn = [o for o in ops.values() if "attention" in o["op"]]
    assert len(mm) == 51 and len(attn) == 8
    padded = {-(-50257 // t) * t / 50257 for t in (128, 256)}       # 50304/50257, 50432/50257
    for o in mm:
        ratio = o["tensor"] / o["analytic"]
        if any(50257 in d for d in o["dims"] if d):
            assert any(ratio == pytest.approx(p, rel=1e-12) for p in padded), (o["dims"], ratio)
        else:
            assert o["tensor"] == o["analytic"], o["dims"]
    for o in attn:
        assert o["tensor"] == 0.75 * o["analytic"], o["op"]
        assert (o["dims"][0 if "backward" not in o["op"] else 1][2], o["dims"][1][2]) == (256, 256)
    allm = mm + attn
    assert sum(o["cuda"] for o in allm) < 1e-3 * sum(o["analytic"] for o in allm)


# -- MobileNetV2: depthwise convolution ------------------------------------------

def _valid(size, out, stride, k=3, pad=1):
    """Taps of a k-wide window with padding pad that fall inside the input, summed
    over the output positions of one dimension."""
    return sum(1 for o in range(out) for t in range(k) if 0 <= o * stride - pad + t < size)


def depthwise(k):
    """(x, stride) of the depthwise op a kernel belongs to, or None."""
    if k["op"] == "aten::convolution" and k["ci"][8] != "1":
        return k["dims"][0], ints(k["ci"][3])[0]
    if k["op"] == "aten::convolution_backward" and k["ci"][9] != "1":
        return k["dims"][1], ints(k["ci"][4])[0]
    return None


def test_native_depthwise_kernels_count_every_in_bounds_tap_and_two_conversions(hw_db):
    """PyTorch's conv_depthwise2d kernels (stride-2 depthwise convolutions, fp16):
    forward, grad-input and grad-weight each execute one FFMA per multiply-add whose
    input is inside the image (padding taps are skipped: (3*Ho-1)^2 of 9*Ho^2 taps
    per channel at stride 2), and two HADD per FFMA: HADD2.F32 Rd, -RZ, Rs.H0_H0, the
    fp16-to-fp32 conversion of the weight and of the input (the SASS test below
    shows the instruction). The same kernels in fp32 (isolated ops) keep the FFMAs
    and have no HADD."""
    seen = 0
    for run, path in ((MOBILE, MOBILE_NCU), (OPS, OPS_NCU)):
        for k in kernels_with_ops(hw_db, run, path):
            if "conv_depthwise2d" not in k["kernel"]:
                continue
            (n, c, h, w), s = depthwise(k)
            taps = n * c * _valid(h, (h + 2 - 3) // s + 1, s) * _valid(w, (w + 2 - 3) // s + 1, s)
            assert k["ffma"] == taps, k["kernel"][:60]
            half = "c10::Half" in re.search(r"conv_depthwise2d_\w+<([^>]*)>", k["kernel"]).group(1)
            assert k["hadd"] == (2 * taps if half else 0)
            seen += 1
    assert seen == 9 + 9          # the step's stride-2 depthwise ops; isolated: dw96 fp16, fp32, dw144 fp32


def test_cudnn_depthwise_kernels_compute_whole_tiles(hw_db):
    """cuDNN's shared-memory tiling kernels (depthwise forward and grad-input;
    stride 1, and the stride-2 forward at 14x14): each computed output is 9 FFMA (the 3x3 taps, padding included)
    and one FMUL (the alpha scale of the epilogue), so FMUL counts the outputs
    computed; they are 1.38x (112x112) to 2.14x (14x14) the true outputs: the
    tiles run past the image edge."""
    over = {}
    for k in kernels_with_ops(hw_db, MOBILE, MOBILE_NCU):
        if "c1_k1_nchw_shmem_tiling" not in k["kernel"]:
            continue
        (n, c, h, w), s = depthwise(k)
        assert k["ffma"] == 9 * k["fmul"], k["kernel"]
        over[(h, s)] = k["fmul"] / (n * c * ((h - 1) // s + 1) * ((w - 1) // s + 1))
    assert set(over) == {(112, 1), (56, 1), (28, 1), (14, 1), (14, 2), (7, 1)}
    assert all(1.3 < r < 2.2 for r in over.values())
    assert over[(112, 1)] == pytest.approx(1.378, abs=1e-3) and over[(14, 1)] == pytest.approx(15 / 7)


def test_depthwise_forward_gap_decomposed(hw_db):
    """docs/reports.md's depthwise row: hardware/analytic of the depthwise forward
    = FFMA (taps computed, 1.67) + HADD (fp16-to-fp32 conversions, 0.47) + FMUL
    (alpha per computed output, 0.08) + HFMA (zeroing registers with HFMA2.MMA
    Rd, -RZ, RZ, 0: 0.04) = 2.27; the backward is 2.08."""
    parts, analytic = {}, {}
    for k in kernels_with_ops(hw_db, MOBILE, MOBILE_NCU):
        if depthwise(k) is None:
            continue
        p = parts.setdefault(k["op"], Counter())
        for op in SASS_OPS:
            p[op] += k[op] * (2 if op.endswith("fma") else 1)
        p["tensor"] += k["tensor"]
        analytic.setdefault(k["op"], {})[k["op_event_id"]] = k["analytic"]
    fwd, an = parts["aten::convolution"], sum(analytic["aten::convolution"].values())
    assert fwd["tensor"] == 0 and fwd["fadd"] == 0
    shares = {op: fwd[op] / an for op in ("ffma", "hadd", "fmul", "hfma")}
    assert shares == pytest.approx({"ffma": 1.674, "hadd": 0.467, "fmul": 0.082, "hfma": 0.044}, abs=0.001)
    assert sum(fwd.values()) / an == pytest.approx(2.267, abs=0.001)
    bwd = parts["aten::convolution_backward"]
    assert sum(bwd.values()) / sum(analytic["aten::convolution_backward"].values()) == pytest.approx(2.079, abs=0.001)


# -- batch norm -------------------------------------------------------------------

BN_PER_ELEMENT = {      # cuDNN's large-image kernels, fp16 input: (FADD, FMUL, FFMA, HADD) per element
    "bn_fw_tr_1C11_kernel_NCHW": (4, 3.5, 3, 2),     # 15.5 FLOP: Welford statistics 9.5 + normalize 6
    "bn_bw_1C11_kernel_new": (4, 2, 3, 4),           # 16 FLOP: two passes over x and dy
}


def test_batch_norm_kernels_per_element(hw_db):
    """Every cuDNN batch-norm kernel of the NCHW family in MobileNetV2's step and in
    the isolated ops executes, per element of its input, the instruction mix that
    the SASS of the isolated kernel shows (test below): forward 4 FADD, 3.5 FMUL,
    3 FFMA and 2 HADD (15.5 FLOP against the convention's 5), backward 4, 2, 3, 4
    (16 against 10); within 2% (the per-channel reductions add more on small
    planes), HADD exactly. fp32 input
    (isolated): the same FADD/FMUL/FFMA and no HADD."""
    seen = Counter()
    for run, path in ((MOBILE, MOBILE_NCU), (OPS, OPS_NCU)):
        for k in kernels_with_ops(hw_db, run, path):
            fam = next((f for f in BN_PER_ELEMENT if f in k["kernel"]), None)
            if fam is None:
                continue
            numel = 1
            for d in k["dims"][0 if "fw" in fam else 1]:
                numel *= d
            fp32 = "<float," in k["kernel"]
            fadd, fmul, ffma, hadd = BN_PER_ELEMENT[fam]
            got = (k["fadd"] / numel, k["fmul"] / numel, k["ffma"] / numel)
            assert got == pytest.approx((fadd, fmul, ffma), rel=0.02), (run, fam, k["dims"])
            assert k["hadd"] == (0 if fp32 else hadd * numel)
            seen[(run, fam, fp32)] += 1
    assert seen == {(MOBILE, "bn_fw_tr_1C11_kernel_NCHW", False): 10, (MOBILE, "bn_bw_1C11_kernel_new", False): 10,
                    (OPS, "bn_fw_tr_1C11_kernel_NCHW", False): 1, (OPS, "bn_bw_1C11_kernel_new", False): 1,
                    (OPS, "bn_fw_tr_1C11_kernel_NCHW", True): 1, (OPS, "bn_bw_1C11_kernel_new", True): 1}
    by_op = {(r["op_name"], r["source"]): r["flops"]
             for r in reports.run(hw_db, "flops_by_op", {"run": MOBILE}).to_pylist()}
    assert by_op[("aten::batch_norm", "ncu")] / by_op[("aten::batch_norm", "analytic")] == pytest.approx(2.74, abs=0.01)
    assert by_op[("aten::cudnn_batch_norm_backward", "ncu")] / by_op[("aten::cudnn_batch_norm_backward", "analytic")] \
        == pytest.approx(1.50, abs=0.01)


# -- the SASS behind the counters (isolated ops, ncu source page) -----------------

def sass_kernels():
    """The source page export: per kernel, in profiling order, (name, [(sass text,
    warp instructions, predicated-on thread instructions)]). ncu printed the page of
    21 of the 31 kernels twice in a row (equal copies): a page equal to the one just
    read is that copy and is skipped (the test checks each page against its
    kernel's counters, so a skip in the wrong place would show)."""
    out = []
    with gzip.open(OPS_SASS, "rt", newline="") as f:
        for row in csv.reader(f):
            if row and row[0] == "Kernel Name":
                out.append([row[1], []])
            elif row and row[0] == "Address":
                col = {h: i for i, h in enumerate(row)}
            elif row:
                out[-1][1].append((row[col["Source"]].strip(), int(row[col["Instructions Executed"]]),
                                   int(row[col["Predicated-On Thread Instructions Executed"]])))
    pages = []
    for i, page in enumerate(out):
        if not (i and page == out[i - 1] and pages[-1] is out[i - 1]):
            pages.append(page)
    return pages


OPCODE = re.compile(r"^(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9]*)((?:\.[A-Z0-9_]+)*)")
COUNTER_OF = {"DADD": "dadd", "DMUL": "dmul", "DFMA": "dfma", "FADD": "fadd", "FMUL": "fmul", "FFMA": "ffma",
              "HADD2": "hadd", "HMUL2": "hmul", "HFMA2": "hfma"}


def test_sass_source_counters_explain_the_flop_counters():
    """ncu's source page (SourceCounters) of the 31 isolated-op kernels: summed per
    opcode, the predicated-on thread instructions equal the kernel's SASS counters
    exactly (so the page says what each counter counted). Every HADD counted is a
    conversion, HADD2.F32 Rd, -RZ, Rs (fp16 to fp32, the compiler's way on sm_90),
    but 0.7% in one cuDNN kernel; HFMA is mostly HFMA2.MMA Rd, -RZ, RZ, imm (a
    register set to a constant); and the batch-norm forward kernel's two loops run,
    per pair of elements, 8 FADD, 7 FMUL, 6 FFMA and 2 MUFU.RCP: Welford's update
    divides by the running count (kept as a float, +1 per element) for each element."""
    sass = sass_kernels()
    counters = ncu_counters(OPS_NCU)
    assert len(sass) == len(counters) == 31
    conv_share = {}
    for (name, rows), kid in zip(sass, sorted(counters)):
        assert re.search(r"([A-Za-z_]\w*)(?:<|\(|$)", name).group(1) in counters[kid]["name"], (name[:60], kid)
        got, cvt, hfma_idiom = Counter(), 0, 0
        for text, _, n in rows:
            m = OPCODE.match(text)
            if m and m.group(1) in COUNTER_OF:
                got[COUNTER_OF[m.group(1)]] += n
                ops = text.replace(" ", "")
                if m.group(1) == "HADD2" and ".F32" in m.group(2) and ",-RZ," in ops:
                    cvt += n
                if m.group(1) == "HFMA2" and ",-RZ,RZ," in ops:
                    hfma_idiom += n
        assert {op: got[op] for op in SASS_OPS} == {op: counters[kid][op] for op in SASS_OPS}, name[:60]
        if got["hadd"]:
            conv_share[kid] = cvt / got["hadd"]
        if got["hfma"] and "xmma" not in name:
            assert hfma_idiom == got["hfma"], name[:60]
    assert min(conv_share.values()) > 0.99 and sum(v == 1 for v in conv_share.values()) == len(conv_share) - 1
    name, rows = next(k for k in sass if k[0].startswith("void cudnn::bn_fw_tr_1C11_kernel_NCHW<__half"))
    loop = max(n for _, _, n in rows)
    mix = Counter(OPCODE.match(t).group(1) + OPCODE.match(t).group(2) for t, _, n in rows if n == loop and OPCODE.match(t))
    assert (mix["FADD"], mix["FMUL"], mix["FFMA"], mix["MUFU.RCP"]) == (8, 7, 6, 2)


def test_elementwise_ops_count_their_conversions(hw_db):
    """The fp16 elementwise ops of the isolated run: ReLU6 (hardtanh_) is one HADD
    per element, the conversion of its input (the clamp itself is FMNMX, not
    counted), so hardware equals analytic by coincidence; hardtanh_backward two
    (grad and input converted: 2x analytic); the residual add two conversions and
    one FFMA (a + alpha*b): 4x."""
    by_op = {(r["op_name"], r["source"]): r for r in reports.run(hw_db, "flops_by_op", {"run": OPS}).to_pylist()}
    ratio = {op: by_op[(op, "ncu")]["flops"] / by_op[(op, "analytic")]["flops"]
             for op in ("aten::hardtanh_", "aten::hardtanh_backward", "aten::add")}
    assert ratio == {"aten::hardtanh_": 1.0, "aten::hardtanh_backward": 2.0, "aten::add": 4.0}
    assert by_op[("aten::hardtanh_", "ncu")]["check"] == "ok"
    per_element = {"aten::hardtanh_": (1, 0), "aten::hardtanh_backward": (2, 0), "aten::add": (2, 1)}  # HADD, FFMA
    seen = set()
    for k in kernels_with_ops(hw_db, OPS, OPS_NCU):
        if k["op"] in per_element:
            numel = max(d[0] * d[1] * d[2] * d[3] for d in k["dims"] if len(d or []) == 4)
            assert (k["hadd"], k["ffma"]) == tuple(x * numel for x in per_element[k["op"]]), k["op"]
            seen.add(k["op"])
    assert seen == set(per_element)


# -- metric_sources across architectures -------------------------------------------

def chip_metrics(path):
    """Metric base names of an `ncu --query-metrics --chip CHIP` excerpt."""
    lines = path.read_text().splitlines()
    assert lines[0] == "Chip " + path.name.split("_")[0]
    return {ln.split()[0] for ln in lines[4:] if ln.strip()}


CHIP_ROWS = {   # chip: the metric_sources metric each tensor quantity resolves to there
    "gv100_ncu2022.3.0.txt": {"flop_tensor_fp16_volta": "smsp__inst_executed_pipe_tensor_op_hmma"},
    "tu102_ncu2025.3.1.txt": {"flop_tensor_fp16": "sm__ops_path_tensor_src_fp16_bf16_tf32_dst_fp32",
                              "flop_tensor_fp16_dst_fp16": "sm__ops_path_tensor_src_fp16_dst_fp16",
                              "flop_tensor_int8": "sm__ops_path_tensor_src_int8"},
    "ga100_ncu2025.3.1.txt": {"flop_tensor_fp16": "sm__ops_path_tensor_src_fp16_dst_fp32",
                              "flop_tensor_fp16_dst_fp16": "sm__ops_path_tensor_src_fp16_dst_fp16",
                              "flop_tensor_bf16": "sm__ops_path_tensor_src_bf16_dst_fp32",
                              "flop_tensor_tf32": "sm__ops_path_tensor_src_tf32_dst_fp32",
                              "flop_tensor_fp64": "sm__ops_path_tensor_src_fp64",
                              "flop_tensor_int8": "sm__ops_path_tensor_src_int8"},
    "ad102_ncu2025.3.1.txt": {"flop_tensor_fp16": "sm__ops_path_tensor_src_fp16_dst_fp32",
                              "flop_tensor_fp16_dst_fp16": "sm__ops_path_tensor_src_fp16_dst_fp16",
                              "flop_tensor_fp8": "sm__ops_path_tensor_src_fp8"},
    "gh100_ncu2025.3.1.txt": {"flop_tensor_fp16": "sm__ops_path_tensor_src_fp16",
                              "flop_tensor_bf16": "sm__ops_path_tensor_src_bf16_dst_fp32",
                              "flop_tensor_fp8": "sm__ops_path_tensor_src_fp8"},
}


def test_metric_sources_tensor_rows_are_the_names_ncu_lists_per_chip(fresh_db):
    """Per chip (ncu --query-metrics --chip, excerpts in tests/data/flops/ncu_chips):
    the first metric_sources row of each tensor quantity that the chip knows is the
    counter ncu's tensor roofline uses there; every src-level tensor counter of a
    floating-point type the chip has is one of those rows (nothing left uncounted:
    Ampere's fp16 with fp16 accumulator, Turing's combined counter), and no chip has
    an aggregate counter beside its parts (Hopper's src_fp16 holds both accumulator
    types, which other chips count apart: summing both would count twice).
    Volta has no ops counter: its HMMA instructions, x512 as in ncu 2022.3's roofline."""
    rows = fresh_db.execute("SELECT quantity, metric, scale FROM metric_sources WHERE quantity LIKE 'flop_tensor_%' "
                            "ORDER BY quantity, priority").fetchall()
    for chip, want in CHIP_ROWS.items():
        known = chip_metrics(CHIPS / chip)
        chosen = {}
        for q, metric, _ in rows:                       # by priority: the first the chip knows
            if metric.rsplit(".", 1)[0] in known and q not in chosen:
                chosen[q] = metric.rsplit(".", 1)[0]
        for q, m in want.items():
            assert chosen[q] == m, (chip, q)
        fp = {m for m in known if re.fullmatch(r"sm__ops_path_tensor_src_(fp|bf|tf)[0-9a-z_]*", m)
              and not m.endswith(("_sparsity_on", "_sparsity_off", "_realtime"))}
        assert fp <= set(chosen.values()), (chip, fp - set(chosen.values()))
        if "sm__ops_path_tensor_src_fp16" in known:
            assert "sm__ops_path_tensor_src_fp16_dst_fp16" not in known and "sm__ops_path_tensor_src_fp16_dst_fp32" not in known
    assert not {m for m in chip_metrics(CHIPS / "gv100_ncu2022.3.0.txt") if "ops_path" in m}
    volta = {(m, s) for q, m, s in rows if q == "flop_tensor_fp16_volta"}
    assert {s for _, s in volta} == {512}
    roofline = (CHIPS / "tensor_roofline_sections.txt").read_text()
    assert '"smsp__inst_executed_pipe_tensor.sum.per_cycle_elapsed * 512"' in roofline
    assert ("smsp__inst_executed_pipe_tensor.sum", 512) in volta


def _cupti_trace(path, major, minor, hmma):
    """A Kineto trace as the CUPTI range profiler writes it: one op, one launch, one
    cuda_profiler_range whose args are counters, on a GPU of the given compute capability."""
    ev = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
          {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10, "dur": 30,
           "args": {"Input Dims": [[256, 256], [256, 256]], "Input type": ["c10::Half"] * 2, "External id": 1}},
          {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 15, "dur": 5,
           "args": {"correlation": 7}},
          {"ph": "X", "cat": "cuda_profiler_range", "name": "volta_h884gemm_64x64_ldg8_nn", "pid": 0, "tid": 0,
           "ts": 50, "dur": 5, "args": {"smsp__inst_executed_pipe_tensor_op_hmma.sum": hmma,
                                         "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": 0}}]
    doc = {"deviceProperties": [{"id": 0, "name": "Tesla V100-SXM2-16GB" if major == 7 else "NVIDIA A100-SXM4-80GB",
                                 "computeMajor": major, "computeMinor": minor}], "traceEvents": ev}
    with gzip.open(path, "wt") as f:
        json.dump(doc, f)
    return path


def test_volta_hmma_rows_count_only_on_volta(tmp_path):
    """HMMA instructions are 512 FLOP each on Volta only: a V100 trace's CUPTI
    counters give 512 x HMMA tensor FLOPs (a 256^3 fp16 GEMM is 2^25 FLOP =
    65536 HMMA), an A100's same counter nothing; and the real H100 ncu report of
    tests/data/ncu, which has the HMMA instruction counter but no tensor-path ops
    counter, gets no tensor FLOPs from it."""
    con = db.connect(tmp_path / "v.duckdb")
    ingest_file(con, _cupti_trace(tmp_path / "v100.json.gz", 7, 0, 65536), run="v100")
    ingest_file(con, _cupti_trace(tmp_path / "a100.json.gz", 8, 0, 65536), run="a100")
    ingest_file(con, DATA / "ncu" / "h100_resnet50_bs64_amp_raw_baseunits.csv.gz", run="h100")
    kf = {r["run"]: r for r in reports.run(con, "kernel_flops", {}).to_pylist() if r["run"] in ("v100", "a100")}
    assert kf["v100"]["tensor_flops"] == 2 * 256 ** 3 and kf["a100"]["tensor_flops"] is None
    by = {r["op_name"]: r for r in reports.run(con, "flops_by_op", {"run": "v100"}).to_pylist() if r["source"] == "cupti"}
    assert by["aten::mm"]["flops"] == 2 * 256 ** 3 and by["aten::mm"]["check"] == "ok"
    assert con.execute("SELECT count(*) FROM counters WHERE run = 'h100' "
                       "AND metric = 'smsp__inst_executed_pipe_tensor_op_hmma.sum' AND value > 0").fetchone()[0] > 0
    assert con.execute("SELECT count(*) FILTER (WHERE tensor_flops IS NOT NULL) FROM kernel_flop_counters "
                       "WHERE run = 'h100'").fetchone()[0] == 0
    con.close()
