"""(e) A GPT-2-small-ish training step (6 blocks, d 768, 12 heads, seq 512, batch 8,
vocab 50304, AMP bf16, AdamW), eager and under torch.compile (default mode), each
profiled for 5 active steps (wait 1, warmup 1). The compiled model is compiled and
warmed (3 steps) before profiling. Usage: gpt_eager_compiled.py OUT_EAGER.json OUT_COMPILED.json"""
import sys

import torch
import torch.nn.functional as F

from common import profiled, timed

dev = "cuda"
V, D, H, L, T, B = 50304, 768, 12, 6, 512, 8


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = torch.nn.LayerNorm(D), torch.nn.LayerNorm(D)
        self.qkv, self.proj = torch.nn.Linear(D, 3 * D), torch.nn.Linear(D, D)
        self.fc, self.out = torch.nn.Linear(D, 4 * D), torch.nn.Linear(4 * D, D)

    def forward(self, x):
        q, k, v = self.qkv(self.ln1(x)).view(B, T, 3, H, D // H).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(B, T, D))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = torch.nn.Embedding(V, D), torch.nn.Embedding(T, D)
        self.blocks = torch.nn.ModuleList([Block() for _ in range(L)])
        self.ln = torch.nn.LayerNorm(D)
        self.head = torch.nn.Linear(D, V, bias=False)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln(x))


def make(compiled):
    torch.manual_seed(0)
    m = GPT().to(dev)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4, fused=True)
    fwd = torch.compile(m) if compiled else m
    idx = torch.randint(0, V, (B, T), device=dev)
    tgt = torch.randint(0, V, (B, T), device=dev)

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = fwd(idx)
        loss = F.cross_entropy(logits.float().view(-1, V), tgt.view(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return step


for compiled, path in ((False, sys.argv[1]), (True, sys.argv[2])):
    step = make(compiled)
    for _ in range(3):
        step()
    print("gpt compiled=%s step ms outside the profiler: %.3f" % (compiled, 1e3 * timed(step, 10)))
    profiled(7, step, path, wait=1, warmup=1, active=5)
