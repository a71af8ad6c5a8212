"""Capture tests/data/flops/: torch profiler traces, throughput and FlopCounterMode
references of training steps (resnet50, mobilenet_v2, a small GPT-2), and the
workload for the ncu report.

  python3 capture_flops.py traces OUTDIR [CONFIG ...]
      for each CONFIG (default: all of CONFIGS): ~2 s of timed steps outside the
      profiler (throughput), then torch.profiler around 3 steps (wait 1, warmup 1,
      active 1; record_shapes, profile_memory) -> OUTDIR/<gpu>_<CONFIG>.json.gz,
      then one step under FlopCounterMode (forward+loss and backward counted
      separately) -> OUTDIR/flop_counter_reference.json; OUTDIR/capture_summary.json
      holds throughputs, kernel counts and versions.
  python3 capture_flops.py ncu CONFIG
      3 warm-up steps, then one step between cudaProfilerStart/Stop
      (for ncu --profile-from-start off).
  --small: tiny inputs on the CPU (to test the script without a GPU).

Training step: SGD(lr=0.01, momentum=0.9); amp = torch.autocast(float16) + GradScaler;
fp32 = no autocast (torch defaults: cudnn.allow_tf32 True, matmul.allow_tf32 False).
"""
import gzip
import json
import os
import re
import shutil
import sys
import time

import torch
from torch.utils.flop_counter import FlopCounterMode

CONFIGS = {
    "resnet50_bs32_amp": ("resnet50", 32, "amp"),
    "resnet50_bs64_amp": ("resnet50", 64, "amp"),
    "resnet50_bs32_fp32": ("resnet50", 32, "fp32"),
    "mobilenet_v2_bs32_amp": ("mobilenet_v2", 32, "amp"),
    "mobilenet_v2_bs64_amp": ("mobilenet_v2", 64, "amp"),
    "gpt2_bs8_amp": ("gpt2", 8, "amp"),
    "gpt2_bs16_amp": ("gpt2", 16, "amp"),
    "gpt2_bs8_fp32": ("gpt2", 8, "fp32"),
}
GPT2_SEQ = 256

SMALL = "--small" in sys.argv
argv = [a for a in sys.argv[1:] if a != "--small"]
DEV = "cpu" if SMALL else "cuda"


def sync():
    if DEV == "cuda":
        torch.cuda.synchronize()


def build(name):
    """Returns (model, fwd, step, info): fwd() computes the loss (under autocast for
    amp); step() is one whole training step."""
    arch, batch, prec = CONFIGS[name]
    torch.manual_seed(0)
    info = {"model": arch, "batch": batch, "precision": prec}
    if arch == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel
        seq = 32 if SMALL else GPT2_SEQ
        cfg = GPT2Config(n_layer=4, n_embd=512, n_head=8, n_positions=256, use_cache=False)
        model = GPT2LMHeadModel(cfg).to(DEV)
        ids = torch.randint(0, cfg.vocab_size, (batch, seq), device=DEV)
        info.update(seq=seq, vocab=cfg.vocab_size,
                    attn_implementation=getattr(model.config, "_attn_implementation", None),
                    input="input_ids [batch, seq] random, labels=input_ids (model's own shifted LM loss)")

        def loss_fn():
            return model(input_ids=ids, labels=ids).loss
    else:
        import torchvision
        res = 32 if SMALL else 224
        model = getattr(torchvision.models, arch)().to(DEV)
        x = torch.randn(batch, 3, res, res, device=DEV)
        y = torch.randint(0, 1000, (batch,), device=DEV)
        info.update(input=f"randn [{batch}, 3, {res}, {res}], 1000 classes, cross_entropy")

        def loss_fn():
            return torch.nn.functional.cross_entropy(model(x), y)
    model.train()
    info["params"] = sum(p.numel() for p in model.parameters())
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    amp = prec == "amp"
    scaler = torch.amp.GradScaler(DEV) if amp else None

    def fwd():
        if amp:
            with torch.autocast(DEV, dtype=torch.float16):
                return loss_fn()
        return loss_fn()

    def bwd(loss):
        (scaler.scale(loss) if amp else loss).backward()

    def opt_step():
        if amp:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()

    def step():
        opt.zero_grad(set_to_none=True)
        bwd(fwd())
        opt_step()

    return model, step, (opt, fwd, bwd, opt_step), info


def gpu_prefix():
    if DEV != "cuda":
        return "cpu"
    m = re.search(r"\b([a-z]{1,2}\d{2,4})\b", torch.cuda.get_device_name().lower())
    return m.group(1) if m else "gpu"


def counts(fc):
    per_module = {mod: {str(op): int(n) for op, n in ops.items()} for mod, ops in fc.get_flop_counts().items()}
    return {"total": int(fc.get_total_flops()), "per_op": per_module.get("Global", {}), "per_module": per_module}


def trace_facts(path):
    with gzip.open(path, "rt") as f:
        t = json.load(f)
    ev = t.get("traceEvents", [])
    kern = [e for e in ev if e.get("cat") == "kernel"]
    names = {e.get("name", "") for e in ev}
    sdpa_ops = sorted(n for n in names if "scaled_dot_product" in n or "_efficient_attention" in n
                      or "_flash_attention" in n or "cudnn_attention" in n)
    attn_kernels = sorted({e["name"] for e in kern if re.search(r"flash|fmha|attention|attn", e["name"], re.I)})
    return {"events": len(ev), "kernels": len(kern),
            "kernel_time_us": round(sum(e.get("dur", 0) for e in kern), 1),
            "profiler_steps": sorted(n for n in names if n.startswith("ProfilerStep")),
            "sdpa_ops": sdpa_ops, "attention_kernels": attn_kernels,
            "has_deviceProperties": "deviceProperties" in t}


def versions():
    v = {"torch": torch.__version__, "cuda": torch.version.cuda,
         "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
         "cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
         "cuda.matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
         "cudnn.benchmark": torch.backends.cudnn.benchmark}
    for mod in ("torchvision", "transformers"):
        try:
            v[mod] = __import__(mod).__version__
        except Exception as e:  # noqa: BLE001
            v[mod] = repr(e)
    if DEV == "cuda":
        v["gpu"] = torch.cuda.get_device_name()
        try:
            import pynvml
            pynvml.nvmlInit()
            v["driver"] = pynvml.nvmlSystemGetDriverVersion()
        except Exception as e:  # noqa: BLE001
            v["driver"] = repr(e)
    return v


def traces(out, names):
    os.makedirs(out, exist_ok=True)
    prefix = gpu_prefix()
    summary = {"versions": versions(), "configs": {}}
    ref_path = os.path.join(out, "flop_counter_reference.json")
    refs = {}
    acts = [torch.profiler.ProfilerActivity.CPU]
    if DEV == "cuda":
        acts.append(torch.profiler.ProfilerActivity.CUDA)
    for name in names:
        t_cfg = time.time()
        model, step, (opt, fwd, bwd, opt_step), info = build(name)
        for _ in range(1 if SMALL else 5):
            step()
        sync()
        if DEV == "cuda":
            torch.cuda.reset_peak_memory_stats()
        secs = 0.2 if SMALL else 2.0
        n, t0 = 0, time.perf_counter()
        while n < (2 if SMALL else 10) or time.perf_counter() - t0 < secs:
            step()
            n += 1
        sync()
        el = time.perf_counter() - t0
        info.update(timed_steps=n, timed_s=round(el, 4), step_ms=round(1000 * el / n, 3),
                    throughput_samples_per_s=round(n * info["batch"] / el, 1))
        if DEV == "cuda":
            info["peak_mem_allocated_MiB"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
        # trace
        path = os.path.join(out, f"{prefix}_{name}.json")
        with torch.profiler.profile(activities=acts, schedule=torch.profiler.schedule(wait=1, warmup=1, active=1),
                                    record_shapes=True, profile_memory=True, with_flops=False) as prof:
            for _ in range(3):
                step()
                prof.step()
        sync()
        prof.export_chrome_trace(path)
        with open(path, "rb") as f, gzip.open(path + ".gz", "wb", compresslevel=9) as g:
            shutil.copyfileobj(f, g)
        os.remove(path)
        info["trace"] = os.path.basename(path) + ".gz"
        info["trace_facts"] = trace_facts(path + ".gz")
        # FlopCounterMode reference: forward+loss, then backward, separately
        opt.zero_grad(set_to_none=True)
        fc_f = FlopCounterMode(display=False)
        with fc_f:
            loss = fwd()
        fc_b = FlopCounterMode(display=False)
        with fc_b:
            bwd(loss)
        opt_step()
        sync()
        f_, b_ = counts(fc_f), counts(fc_b)
        refs[name] = {k: info[k] for k in ("model", "batch", "precision", "seq", "attn_implementation")
                      if k in info}
        refs[name].update(forward=f_, backward=b_, total=f_["total"] + b_["total"],
                          flops_per_sample=(f_["total"] + b_["total"]) / info["batch"])
        info["flop_counter"] = {"forward": f_["total"], "backward": b_["total"],
                                "total": f_["total"] + b_["total"]}
        info["achieved_tflops_per_s"] = round(info["flop_counter"]["total"] / (el / n) / 1e12, 2)
        info["config_wall_s"] = round(time.time() - t_cfg, 1)
        summary["configs"][name] = info
        print(json.dumps({name: {k: v for k, v in info.items() if k != "trace_facts"}}), flush=True)
        print("  trace", json.dumps(info["trace_facts"]), flush=True)
        del model, step, opt, fwd, bwd, opt_step, loss, prof, fc_f, fc_b
        if DEV == "cuda":
            torch.cuda.empty_cache()
        with open(ref_path, "w") as f:
            json.dump({"versions": summary["versions"], "configs": refs}, f, indent=1)
        with open(os.path.join(out, "capture_summary.json"), "w") as f:
            json.dump(summary, f, indent=1)


def ncu(name):
    _, step, _, info = build(name)
    for _ in range(3):
        step()
    sync()
    torch.cuda.cudart().cudaProfilerStart()
    step()
    sync()
    torch.cuda.cudart().cudaProfilerStop()
    print("ncu step done", json.dumps(info), flush=True)


if __name__ == "__main__":
    if argv[0] == "traces":
        traces(argv[1], argv[2:] or list(CONFIGS))
    elif argv[0] == "ncu":
        ncu(argv[1])
    else:
        sys.exit(__doc__)
