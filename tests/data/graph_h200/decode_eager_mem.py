"""(f) The decode loop of graph_decode.py run eagerly (no graph) with profile_memory=True, beside
a preallocated 1 GiB key/value cache that each token reads a slice of: the step holds ~1.2 GiB and
allocates only its small per-token activations inside the iteration (the case where a straight
line from the iteration's own allocations says the batch might grow a million times).
32 tokens a step, then the tokens to the host; wait 1, warmup 1, active 3.
Usage: decode_eager_mem.py OUT_TRACE.json"""
import sys

import torch
from torch.profiler import ProfilerActivity, profile, schedule

torch.manual_seed(0)
dev = "cuda"
V, D, L, B, CACHE = 8192, 1024, 4, 16, 4096
emb = torch.nn.Embedding(V, D).to(dev).half()
blocks = torch.nn.ModuleList([torch.nn.Sequential(torch.nn.Linear(D, 4 * D), torch.nn.GELU(),
                                                  torch.nn.Linear(4 * D, D)) for _ in range(L)]).to(dev).half()
norms = torch.nn.ModuleList([torch.nn.LayerNorm(D) for _ in range(L)]).to(dev).half()
head = torch.nn.Linear(D, V).to(dev).half()
kv = torch.randn(L, 2, B, CACHE, 128, 8, device=dev, dtype=torch.half)     # 1 GiB
tok = torch.zeros(B, dtype=torch.long, device=dev)


@torch.no_grad()
def step():
    t = tok
    out = []
    for i in range(32):
        h = emb(t)
        for j, (blk, nrm) in enumerate(zip(blocks, norms)):
            h = nrm(h + blk(h) + kv[j, 0, :, i, :, 0].sum(-1, keepdim=True) * 0)
        t = head(h).argmax(-1)
        out.append(t)
    return torch.stack(out).cpu()


for _ in range(3):
    step()
torch.cuda.synchronize()
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True, profile_memory=True,
             schedule=schedule(wait=1, warmup=1, active=3)) as prof:
    for _ in range(5):
        step()
        prof.step()
torch.cuda.synchronize()
prof.export_chrome_trace(sys.argv[1])
print("decode_eager_mem max allocated GiB %.2f" % (torch.cuda.max_memory_allocated() / 2**30))
