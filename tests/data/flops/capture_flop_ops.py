"""Isolated ops at MobileNetV2 (batch 32, 224x224, amp) shapes, for ncu: the
depthwise 3x3 convolutions (forward, and convolution_backward with grad_input
and grad_weight, as autograd calls it), batch norm (training forward and
backward, eval forward), and the elementwise ops whose hardware/analytic
ratio is not 1 (hardtanh backward, fp16 residual add); fp32 copies of some
as an ablation (no fp16 operands to convert).

  python3 capture_flop_ops.py trace OUT.json.gz   torch.profiler trace (record_shapes) of one
                                       pass over the cases, each in record_function("case:NAME")
  python3 capture_flop_ops.py ncu                 warm-up passes, then one pass between
                                       cudaProfilerStart/Stop (ncu --profile-from-start off)
  --small: tiny shapes on the CPU (to test the script without a GPU).
"""
import gzip
import json
import os
import shutil
import sys

import torch
import torch.nn.functional as F

SMALL = "--small" in sys.argv
argv = [a for a in sys.argv[1:] if a != "--small"]
DEV = "cpu" if SMALL else "cuda"
B = 2 if SMALL else 32


def hw(h):
    return max(4, h // 16) if SMALL else h


# name: (channels, input size, stride, dtype); weights in the input's dtype, as under autocast
DEPTHWISE = {
    "dw96_112_s2": (96, 112, 2, torch.float16),     # at::native conv_depthwise2d kernels
    "dw144_56_s1": (144, 56, 1, torch.float16),     # cuDNN conv2d_c1_k1 / xmma wgrad / dgrad2d_c1_k1
    "dw384_14_s1": (384, 14, 1, torch.float16),     # cuDNN conv2d_c1_k1 / wgrad2d_shmem / dgrad2d_c1_k1
    "dw96_112_s2_fp32": (96, 112, 2, torch.float32),
    "dw144_56_s1_fp32": (144, 56, 1, torch.float32),
}
# name: (channels, size, training, input dtype); weight, bias, running stats fp32 (autocast leaves BN in fp32)
BATCHNORM = {
    "bn96_112": (96, 112, True, torch.float16),     # bn_fw_tr_1C11_kernel_NCHW / bn_bw_1C11_kernel_new
    "bn192_28": (192, 28, True, torch.float16),     # bn_*_1C11_singleread_spec<__half2>
    "bn960_7": (960, 7, True, torch.float16),       # bn_*_1C11_singleread<__half>
    "bn96_112_eval": (96, 112, False, torch.float16),
    "bn96_112_fp32": (96, 112, True, torch.float32),
}
ELTWISE = {
    "hardtanh_96_112": (96, 112),                   # ReLU6 forward (in place) and its backward
    "add_24_56": (24, 56),                          # the fp16 residual add
}


def make():
    """The cases: name -> a function that runs it once (its inputs made beforehand)."""
    torch.manual_seed(0)
    cases = {}
    for name, (c, h, s, dt) in DEPTHWISE.items():
        x = torch.randn(B, c, hw(h), hw(h), device=DEV, dtype=dt)
        w = torch.randn(c, 1, 3, 3, device=DEV, dtype=dt)
        go = torch.randn_like(F.conv2d(x, w, None, s, 1, 1, c))

        def run(x=x, w=w, go=go, s=s, c=c):
            F.conv2d(x, w, None, s, 1, 1, c)
            torch.ops.aten.convolution_backward(go, x, w, None, [s, s], [1, 1], [1, 1], False, [0, 0], c,
                                                [True, True, False])
        cases[name] = run
    for name, (c, h, train, dt) in BATCHNORM.items():
        x = torch.randn(B, c, hw(h), hw(h), device=DEV, dtype=dt, requires_grad=train)
        w = torch.rand(c, device=DEV) + 0.5
        b = torch.randn(c, device=DEV, requires_grad=False)
        w.requires_grad_(train)
        b.requires_grad_(train)
        rm, rv = torch.zeros(c, device=DEV), torch.ones(c, device=DEV)
        gy = torch.randn_like(x, requires_grad=False)

        def run(x=x, w=w, b=b, rm=rm, rv=rv, gy=gy, train=train):
            if train:
                x.grad = w.grad = b.grad = None
                F.batch_norm(x, rm, rv, w, b, training=True, momentum=0.1, eps=1e-5).backward(gy)
            else:
                with torch.no_grad():
                    F.batch_norm(x, rm, rv, w, b, training=False, momentum=0.1, eps=1e-5)
        cases[name] = run
    c, h = ELTWISE["hardtanh_96_112"]
    xh = torch.randn(B, c, hw(h), hw(h), device=DEV, dtype=torch.float16) * 4
    gh = torch.randn_like(xh)

    def hardtanh():
        y = F.hardtanh(xh.clone(), 0.0, 6.0, inplace=True)
        torch.ops.aten.hardtanh_backward(gh, y, 0.0, 6.0)
    cases["hardtanh_96_112"] = hardtanh
    c, h = ELTWISE["add_24_56"]
    a1 = torch.randn(B, c, hw(h), hw(h), device=DEV, dtype=torch.float16)
    a2 = torch.randn_like(a1)
    cases["add_24_56"] = lambda: a1 + a2
    return cases


def sync():
    if DEV == "cuda":
        torch.cuda.synchronize()


def trace(out):
    cases = make()
    for run in cases.values():
        run()
    sync()
    acts = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if DEV == "cuda" else [])
    with torch.profiler.profile(activities=acts, record_shapes=True) as prof:
        with torch.profiler.record_function("ProfilerStep#1"):
            for name, run in cases.items():
                with torch.profiler.record_function("case:" + name):
                    run()
            sync()
    path = out[:-3] if out.endswith(".gz") else out
    prof.export_chrome_trace(path)
    if out.endswith(".gz"):
        with open(path, "rb") as f, gzip.open(out, "wb", compresslevel=9) as g:
            shutil.copyfileobj(f, g)
        os.remove(path)
    print("cases", json.dumps(list(cases)), flush=True)


def ncu():
    cases = make()
    for _ in range(2):
        for run in cases.values():
            run()
    sync()
    torch.cuda.cudart().cudaProfilerStart()
    for run in cases.values():
        run()
    sync()
    torch.cuda.cudart().cudaProfilerStop()
    print("ncu cases done", json.dumps(list(cases)), flush=True)


if __name__ == "__main__":
    if argv[0] == "trace":
        trace(argv[1])
    elif argv[0] == "ncu":
        ncu()
    else:
        sys.exit(__doc__)
