"""(a) A whole training step (forward, backward, SGD update) captured in ONE CUDA graph
(torch.cuda.graph, the "whole network capture" recipe of the PyTorch docs), replayed
each step after copying the step's batch into the graph's static input.
Usage: graph_train.py OUT_TRACE.json"""
import sys

import torch

from common import profiled, timed

torch.manual_seed(0)
dev = "cuda"
D, B = 2048, 512
model = torch.nn.Sequential(torch.nn.Linear(1024, D), torch.nn.ReLU(), torch.nn.Linear(D, D), torch.nn.ReLU(),
                            torch.nn.Linear(D, D), torch.nn.ReLU(), torch.nn.Linear(D, 10)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
loss_fn = torch.nn.CrossEntropyLoss()
batches = [(torch.randn(B, 1024, device=dev), torch.randint(0, 10, (B,), device=dev)) for _ in range(8)]
sx, sy = batches[0][0].clone(), batches[0][1].clone()
s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    for _ in range(3):
        opt.zero_grad(set_to_none=True)
        loss_fn(model(sx), sy).backward()
        opt.step()
torch.cuda.current_stream().wait_stream(s)
g = torch.cuda.CUDAGraph()
opt.zero_grad(set_to_none=True)
with torch.cuda.graph(g):
    static_loss = loss_fn(model(sx), sy)
    static_loss.backward()
    opt.step()
i = [0]


def step():
    x, y = batches[i[0] % len(batches)]
    i[0] += 1
    sx.copy_(x)
    sy.copy_(y)
    g.replay()


for _ in range(10):
    step()
print("graph_train step ms outside the profiler: %.3f" % (1e3 * timed(step, 50)))
profiled(6, step, sys.argv[1], wait=1, warmup=1, active=4)
print("graph_train loss", float(static_loss))
