"""Capture tests/data/dist/: per-rank torch profiler traces of 2-GPU training of a
small GPT-2 (transformers GPT2LMHeadModel, n_layer=4, n_embd=512, n_head=8, seq 256,
batch 8 per rank, random init), autocast bfloat16, SGD(lr=0.01, momentum=0.9); in mode
ddp_overlap a ResNet-50 instead.

  torchrun --standalone --nproc_per_node=2 capture_dist.py MODE OUTDIR [--small] [--batch N]

MODE
  ddp            DistributedDataParallel
  fsdp           FSDP2: torch.distributed.fsdp.fully_shard on each GPT2Block, then the root
  ddp_2pg        ddp + a second process group dist.new_group([0, 1], group_desc="metrics"):
                 each step all_reduce(loss) on it after the forward, and all_gather_into_tensor
                 of a per-rank token count on it after the optimizer step
  ddp_straggler  ddp, but rank 1 sleeps 20 ms on the CPU (time.sleep(0.020), inside
                 record_function("straggler_sleep_20ms")) between forward and backward
  ddp_overlap    DistributedDataParallel (default settings) of torchvision resnet50 (random init,
                 NCHW), 224x224 images, batch 512 per rank (--batch N: another), cross-entropy
                 over 1000 classes: each rank's backward is long (GPU-bound) against the
                 all-reduce of its ~100 MB of gradients, so the buckets' all-reduces run
                 beside the backward, and the ranks, doing the same work, stay in step

Each rank: 3 warm-up steps, 40 timed steps (step time), then torch.profiler
(CPU+CUDA, schedule wait=1 warmup=1 active=2, record_shapes=True) over 4 steps ->
OUTDIR/MODE/rank{R}.json.gz, and OUTDIR/MODE/facts_rank{R}.json (what the trace holds).
The process group is initialized before the profiler, so the traces carry distributedInfo.
--small: batch 2, seq 32, vocab 1000 (ddp_overlap: batch 2, 64x64 images) on the CPU with
gloo (to test the script without GPUs).
"""
import gzip
import json
import os
import re
import shutil
import sys
import time

import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile, record_function, schedule

SMALL = "--small" in sys.argv
argv = [a for a in sys.argv[1:] if a != "--small"]
CNN_BATCH = 512                     # ddp_overlap: images per rank
if "--batch" in argv:
    i = argv.index("--batch")
    CNN_BATCH = int(argv[i + 1])
    del argv[i:i + 2]
MODE, OUT = argv[0], argv[1]
CUDA = not SMALL
BATCH, SEQ = (2, 32) if SMALL else (8, 256)
IMAGE = 64 if SMALL else 224        # ddp_overlap: image side
if SMALL:
    CNN_BATCH = 2
STRAGGLER_RANK, STRAGGLER_SLEEP_S = 1, 0.020


def trace_facts(path):
    with gzip.open(path, "rt") as f:
        t = json.load(f)
    ev = t.get("traceEvents", [])
    kern = [e for e in ev if e.get("cat") == "kernel"]
    nccl = {}
    for e in kern:
        if "nccl" in e["name"].lower():
            nccl[e["name"]] = nccl.get(e["name"], 0) + 1
    comms = [e for e in ev if e.get("name") == "record_param_comms"]
    keys = sorted({k for e in comms for k in e.get("args", {})})
    groups = {}
    for e in comms:
        a = e.get("args", {})
        g = (str(a.get("Process Group Name")), str(a.get("Process Group Description")),
             str(a.get("Process Group Ranks")))
        c = groups.setdefault(" | ".join(g), {})
        c[str(a.get("Collective name"))] = c.get(str(a.get("Collective name")), 0) + 1
    gpu_comms = [e for e in kern if "Collective name" in e.get("args", {}) or "nccl" in e["name"].lower()]
    return {
        "events": len(ev),
        "distributedInfo": t.get("distributedInfo"),
        "profiler_steps": sorted({e["name"] for e in ev if e.get("name", "").startswith("ProfilerStep")}),
        "kernels": len(kern),
        "nccl_kernels": nccl,
        "record_param_comms_cpu_events": len(comms),
        "record_param_comms_arg_keys": keys,
        "record_param_comms_example": comms[len(comms) // 2] if comms else None,
        "groups_collectives (pg name | desc | ranks)": groups,
        "gpu_comm_kernel_arg_keys": sorted({k for e in gpu_comms for k in e.get("args", {})}),
        "gpu_comm_kernel_example": gpu_comms[len(gpu_comms) // 2] if gpu_comms else None,
        "user_annotations": sorted({e["name"] for e in ev if e.get("cat") == "user_annotation"})[:50],
    }


def main():
    local = int(os.environ["LOCAL_RANK"])
    if CUDA:
        torch.cuda.set_device(local)
        dev = torch.device("cuda", local)
    else:
        dev = torch.device("cpu")
    dist.init_process_group("nccl" if CUDA else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    g = torch.Generator(device="cpu").manual_seed(1000 + rank)
    if MODE == "ddp_overlap":
        import torchvision
        model = torchvision.models.resnet50().to(dev)
        attn_impl, per_step, unit = None, CNN_BATCH, "samples"
        images = torch.randn(CNN_BATCH, 3, IMAGE, IMAGE, generator=g).to(dev)
        classes = torch.randint(0, 1000, (CNN_BATCH,), generator=g).to(dev)
    else:
        from transformers import GPT2Config, GPT2LMHeadModel
        cfg = GPT2Config(n_layer=4, n_embd=512, n_head=8, n_positions=256, use_cache=False)
        if SMALL:
            cfg.vocab_size = 1000
        model = GPT2LMHeadModel(cfg).to(dev)
        attn_impl, per_step, unit = getattr(model.config, "_attn_implementation", None), BATCH * SEQ, "tokens"
    if MODE == "fsdp":
        from torch.distributed.fsdp import fully_shard
        for block in model.transformer.h:
            fully_shard(block)
        fully_shard(model)
    else:
        from torch.nn.parallel import DistributedDataParallel as DDP
        model = DDP(model, device_ids=[local] if CUDA else None)
    pg2 = None
    if MODE == "ddp_2pg":
        try:
            pg2 = dist.new_group([0, 1], group_desc="metrics")
        except TypeError:
            pg2 = dist.new_group([0, 1])
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    if MODE != "ddp_overlap":
        ids = torch.randint(0, cfg.vocab_size, (BATCH, SEQ), generator=g).to(dev)
        ntok = torch.tensor([float(ids.numel())], device=dev)
    gathered = torch.zeros(world, device=dev)
    adt = torch.bfloat16

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=adt):
            if MODE == "ddp_overlap":
                loss = torch.nn.functional.cross_entropy(model(images), classes)
            else:
                loss = model(input_ids=ids, labels=ids).loss
        if pg2 is not None:
            with record_function("metrics_all_reduce_loss"):
                m = loss.detach().float().clone()
                dist.all_reduce(m, group=pg2)
        if MODE == "ddp_straggler" and rank == STRAGGLER_RANK:
            with record_function("straggler_sleep_20ms"):
                time.sleep(STRAGGLER_SLEEP_S)
        loss.backward()
        opt.step()
        if pg2 is not None:
            with record_function("metrics_all_gather_tokens"):
                dist.all_gather_into_tensor(gathered, ntok, group=pg2)
        return loss

    def sync():
        if CUDA:
            torch.cuda.synchronize()

    for _ in range(3):
        step()
    sync()
    dist.barrier()
    n, t0 = (5 if SMALL else 40), time.perf_counter()  # the same count on every rank
    for _ in range(n):
        step()
    sync()
    el = time.perf_counter() - t0
    dist.barrier()
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if CUDA else [])
    with profile(activities=acts, schedule=schedule(wait=1, warmup=1, active=2), record_shapes=True) as prof:
        for _ in range(4):
            step()
            prof.step()
    sync()
    d = os.path.join(OUT, MODE)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, f"rank{rank}.json")
    prof.export_chrome_trace(path)
    with open(path, "rb") as f, gzip.open(path + ".gz", "wb", compresslevel=9) as gz:
        shutil.copyfileobj(f, gz)
    os.remove(path)
    facts = {"mode": MODE, "rank": rank, "world": world, "timed_steps": n, "step_ms": round(1000 * el / n, 3),
             f"{unit}_per_s_this_rank": round(n * per_step / el, 1), "attn_implementation": attn_impl,
             "device": torch.cuda.get_device_name(dev) if CUDA else "cpu",
             "torch": torch.__version__, "nccl": ".".join(map(str, torch.cuda.nccl.version())) if CUDA else None,
             "pg2": None if pg2 is None else {"group_name": getattr(pg2, "group_name", None),
                                               "group_desc": getattr(pg2, "group_desc", None)},
             "default_pg": {"group_name": getattr(dist.group.WORLD, "group_name", None),
                            "group_desc": getattr(dist.group.WORLD, "group_desc", None)}}
    facts["trace"] = trace_facts(path + ".gz")
    with open(os.path.join(d, f"facts_rank{rank}.json"), "w") as f:
        json.dump(facts, f, indent=1, default=str)
    short = {k: v for k, v in facts.items() if k != "trace"}
    short.update({k: facts["trace"][k] for k in ("nccl_kernels", "record_param_comms_arg_keys",
                                                  "groups_collectives (pg name | desc | ranks)", "profiler_steps")})
    short["distributedInfo"] = facts["trace"]["distributedInfo"]
    print(json.dumps(short, default=str), flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
