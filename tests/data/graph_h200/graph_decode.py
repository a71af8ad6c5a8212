"""(b) A decode-like loop: one token's forward (embedding, 4 blocks of
matmul/gelu/matmul/layernorm with a residual, logits, argmax fed back as the next
token) captured once as a CUDA graph; each profiled step replays it 32 times, then
reads the generated tokens back (one sync per step, as a generate loop does).
Usage: graph_decode.py OUT_TRACE.json"""
import sys

import torch

from common import profiled, timed

torch.manual_seed(0)
dev = "cuda"
V, D, L, B = 8192, 1024, 4, 16
emb = torch.nn.Embedding(V, D).to(dev).half()
blocks = torch.nn.ModuleList([torch.nn.Sequential(torch.nn.Linear(D, 4 * D), torch.nn.GELU(),
                                                  torch.nn.Linear(4 * D, D)) for _ in range(L)]).to(dev).half()
norms = torch.nn.ModuleList([torch.nn.LayerNorm(D) for _ in range(L)]).to(dev).half()
head = torch.nn.Linear(D, V).to(dev).half()
tok = torch.zeros(B, dtype=torch.long, device=dev)
out = torch.zeros(32, B, dtype=torch.long, device=dev)
pos = torch.zeros((), dtype=torch.long, device=dev)


@torch.no_grad()
def one_token():
    h = emb(tok)
    for blk, nrm in zip(blocks, norms):
        h = nrm(h + blk(h))
    nxt = head(h).argmax(-1)
    tok.copy_(nxt)
    out.index_copy_(0, pos.view(1), nxt.view(1, B))
    pos.add_(1).remainder_(32)


s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    for _ in range(3):
        one_token()
torch.cuda.current_stream().wait_stream(s)
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    one_token()


def step():
    for _ in range(32):
        g.replay()
    out.cpu()


for _ in range(5):
    step()
print("graph_decode step ms outside the profiler: %.3f" % (1e3 * timed(step, 20)))
profiled(5, step, sys.argv[1], wait=1, warmup=1, active=3)
