"""Capture tensor- and pipeline-parallel rank traces (issue 49): a small transformer
with Megatron-style tensor parallelism written with plain torch.distributed (no
DTensor), on every GPU of the host, TP 2 x DP (world / 2).

  torchrun --standalone --nproc_per_node=N capture_tp.py MODE OUTDIR [--small]

MODE
  tp            TP 2 x DP N/2: 4 blocks (d 1024, 16 heads, MLP 4096, causal SDPA), the qkv and
                fc1 linears column-parallel and the out-projection and fc2 row-parallel over the
                TP group: per block 2 all-reduces in the forward (from the main thread) and 2 in
                the backward (from the autograd thread); embedding and head replicated. With
                N >= 4 the DP groups (ranks r, r+2) wrap the model in FSDP2 fully_shard(mesh of
                the DP group) (DistributedDataParallel over the DP group when fully_shard
                fails; facts say which). Groups are made with dist.new_group and no description,
                so their kind must be told from their collectives.
  tp_straggler  tp, but rank 1 sleeps 20 ms on the CPU between forward and backward
                (record_function("straggler_sleep_20ms")), as dist/ddp_straggler
  pp            2 ranks: a pipeline of 2 stages (2 blocks each), GPipe schedule of 4
                micro-batches with dist.send / dist.recv of activations and their gradients

Batch 8 x seq 512 per TP group (each micro-batch 2 in pp), random tokens (vocab 8192),
autocast bfloat16, SGD(lr=0.01, momentum=0.9). Each rank: 3 warm-up steps, 40 timed
steps, then torch.profiler (CPU+CUDA, schedule wait=1 warmup=1 active=2,
record_shapes=True) over 4 steps -> OUTDIR/MODE/rank{R}.json.gz and facts_rank{R}.json.
"""
import gzip
import json
import os
import shutil
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile, record_function, schedule

SMALL = "--small" in sys.argv
argv = [a for a in sys.argv[1:] if a != "--small"]
MODE, OUT = argv[0], argv[1]
CUDA = not SMALL
D, HEADS, FF, LAYERS, VOCAB = (64, 4, 256, 4, 100) if SMALL else (1024, 16, 4096, 4, 8192)
BATCH, SEQ = (2, 16) if SMALL else (8, 512)
TP = 2
TP_GROUP = None


class CopyToTP(torch.autograd.Function):
    """Identity in the forward, all-reduce of the gradient in the backward (Megatron's f)."""
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        g = g.contiguous()
        dist.all_reduce(g, group=TP_GROUP)
        return g


class ReduceFromTP(torch.autograd.Function):
    """All-reduce in the forward, identity in the backward (Megatron's g)."""
    @staticmethod
    def forward(ctx, x):
        x = x.contiguous()
        dist.all_reduce(x, group=TP_GROUP)
        return x

    @staticmethod
    def backward(ctx, g):
        return g


class Block(nn.Module):
    def __init__(self, tp):
        super().__init__()
        self.tp, self.h = tp, HEADS // tp
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.qkv = nn.Linear(D, 3 * D // tp)
        self.proj = nn.Linear(D // tp, D, bias=False)
        self.fc1 = nn.Linear(D, FF // tp)
        self.fc2 = nn.Linear(FF // tp, D, bias=False)

    def forward(self, x):
        b, s, _ = x.shape
        y = self.ln1(x)
        if self.tp > 1:
            y = CopyToTP.apply(y)
        q, k, v = self.qkv(y).view(b, s, 3, self.h, D // HEADS).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, -1)
        a = self.proj(a)
        x = x + (ReduceFromTP.apply(a) if self.tp > 1 else a)
        y = self.ln2(x)
        if self.tp > 1:
            y = CopyToTP.apply(y)
        m = self.fc2(F.gelu(self.fc1(y)))
        return x + (ReduceFromTP.apply(m) if self.tp > 1 else m)


class Model(nn.Module):
    def __init__(self, tp, layers, embed=True, head=True):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, D) if embed else None
        self.blocks = nn.ModuleList(Block(tp) for _ in range(layers))
        self.head = nn.Linear(D, VOCAB) if head else None

    def forward(self, x):
        if self.emb is not None:
            x = self.emb(x)
        for blk in self.blocks:
            x = blk(x)
        return self.head(x) if self.head is not None else x


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
    groups = {}
    for e in comms:
        a = e.get("args", {})
        g = " | ".join(str(a.get(k)) for k in ("Process Group Name", "Process Group Description",
                                                 "Process Group Ranks"))
        c = groups.setdefault(g, {})
        key = f"{a.get('Collective name')} (tid {'main' if e.get('tid') == e.get('pid') else 'other'})"
        c[key] = c.get(key, 0) + 1
    return {"events": len(ev), "distributedInfo": t.get("distributedInfo"), "kernels": len(kern),
            "nccl_kernels": nccl, "record_param_comms_cpu_events": len(comms),
            "groups_collectives (pg name | desc | ranks)": groups,
            "user_annotations": sorted({e["name"] for e in ev if e.get("cat") == "user_annotation"})[:50]}


def main():
    global TP_GROUP
    local = int(os.environ["LOCAL_RANK"])
    if CUDA:
        torch.cuda.set_device(local)
        dev = torch.device("cuda", local)
    else:
        dev = torch.device("cpu")
    dist.init_process_group("nccl" if CUDA else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    facts = {"mode": MODE, "rank": rank, "world": world}
    dp_group, how = None, None
    if MODE in ("tp", "tp_straggler"):
        assert world % TP == 0
        dp = world // TP
        for i in range(dp):                     # every rank makes every group, in one order
            g = dist.new_group(list(range(i * TP, (i + 1) * TP)))
            if rank // TP == i:
                TP_GROUP = g
        for j in range(TP):
            g = dist.new_group(list(range(j, world, TP)))
            if rank % TP == j:
                dp_group = g
        facts.update(tp=TP, dp=dp, tp_ranks=list(range(rank // TP * TP, rank // TP * TP + TP)),
                     dp_ranks=list(range(rank % TP, world, TP)))
        def make():
            torch.manual_seed(100 + rank % TP)       # one TP shard per TP rank, the same across DP
            m = Model(TP, LAYERS).to(dev)
            # the replicated parts (embedding, layer norms, head) must agree across the TP group
            for p in [*m.emb.parameters(), *m.head.parameters(),
                      *[p for b in m.blocks for p in [*b.ln1.parameters(), *b.ln2.parameters()]]]:
                dist.broadcast(p.data, src=rank // TP * TP, group=TP_GROUP)
            return m
        model = make()
        if dp > 1:
            try:
                from torch.distributed.device_mesh import DeviceMesh
                from torch.distributed.fsdp import fully_shard
                mesh = DeviceMesh.from_group(dp_group, "cuda" if CUDA else "cpu")
                for b in model.blocks:
                    fully_shard(b, mesh=mesh)
                fully_shard(model, mesh=mesh)
                how = "fsdp2 fully_shard over the DP group"
            except Exception as e:   # noqa: BLE001 - recorded in the facts
                from torch.nn.parallel import DistributedDataParallel as DDP
                model = DDP(make(), device_ids=[local] if CUDA else None, process_group=dp_group)
                how = f"DistributedDataParallel over the DP group (fully_shard failed: {e!r:.200})"
        facts["dp_wrapper"] = how
        g = torch.Generator(device="cpu").manual_seed(1000 + rank // TP)   # one batch per DP rank
        ids = torch.randint(0, VOCAB, (BATCH, SEQ), generator=g).to(dev)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

        def step():
            opt.zero_grad(set_to_none=True)
            with torch.autocast(dev.type, dtype=torch.bfloat16):
                logits = model(ids)
                loss = F.cross_entropy(logits.float().view(-1, VOCAB), ids.view(-1))
            if MODE == "tp_straggler" and rank == 1:
                with record_function("straggler_sleep_20ms"):
                    time.sleep(0.020)
            loss.backward()
            opt.step()
    elif MODE == "pp":
        assert world == 2
        torch.manual_seed(200 + rank)
        stage = Model(1, LAYERS // 2, embed=rank == 0, head=rank == 1).to(dev)
        opt = torch.optim.SGD(stage.parameters(), lr=0.01, momentum=0.9)
        mbs, mb = 4, BATCH // 4
        g = torch.Generator(device="cpu").manual_seed(1000)
        ids = torch.randint(0, VOCAB, (BATCH, SEQ), generator=g).to(dev)

        def step():
            opt.zero_grad(set_to_none=True)
            outs, ins = [], []
            for i in range(mbs):                  # forward of every micro-batch (GPipe)
                with torch.autocast(dev.type, dtype=torch.bfloat16):
                    if rank == 0:
                        y = stage(ids[i * mb:(i + 1) * mb])
                        dist.send(y.detach().to(torch.bfloat16).contiguous(), 1)
                        outs.append(y)
                    else:
                        x = torch.empty(mb, SEQ, D, device=dev, dtype=torch.bfloat16)
                        dist.recv(x, 0)
                        x.requires_grad_(True)
                        logits = stage(x)
                        outs.append(F.cross_entropy(logits.float().view(-1, VOCAB),
                                                    ids[i * mb:(i + 1) * mb].reshape(-1)) / mbs)
                        ins.append(x)
            for i in range(mbs):                  # backward, gradients sent back
                if rank == 1:
                    outs[i].backward()
                    dist.send(ins[i].grad.contiguous(), 0)
                else:
                    gr = torch.empty(mb, SEQ, D, device=dev, dtype=torch.bfloat16)
                    dist.recv(gr, 1)
                    outs[i].backward(gr.to(outs[i].dtype))
            opt.step()
        facts["pp"] = {"stages": 2, "micro_batches": mbs, "schedule": "GPipe (all forwards, then all backwards)"}
    else:
        raise SystemExit(f"unknown mode {MODE}")

    def sync():
        if CUDA:
            torch.cuda.synchronize()

    for _ in range(3):
        step()
    sync()
    dist.barrier()
    n, t0 = (5 if SMALL else 40), time.perf_counter()
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
    facts.update({"timed_steps": n, "step_ms": round(1000 * el / n, 3),
                  "device": torch.cuda.get_device_name(dev) if CUDA else "cpu", "torch": torch.__version__,
                  "nccl": ".".join(map(str, torch.cuda.nccl.version())) if CUDA else None})
    facts["trace"] = trace_facts(path + ".gz")
    with open(os.path.join(d, f"facts_rank{rank}.json"), "w") as f:
        json.dump(facts, f, indent=1, default=str)
    print(json.dumps({k: v for k, v in facts.items() if k != "trace"}, default=str), flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
