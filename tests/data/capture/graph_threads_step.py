"""A small CNN step captured into a CUDA graph and replayed (kernels launched by
cudaGraphLaunch), plus a worker thread that launches its own kernels, under the
torch profiler with no schedule (so: no ProfilerStep markers; each replay sits in
a record_function("train_iter")). Usage: OUT.json"""
import sys
import threading

import torch

dev = "cuda"
model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(),
                            torch.nn.Flatten(), torch.nn.Linear(16 * 32 * 32, 10)).to(dev)
x = torch.randn(8, 3, 32, 32, device=dev)
s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    for _ in range(3):
        y = model(x)
torch.cuda.current_stream().wait_stream(s)
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    y = model(x)


def worker():
    a = torch.randn(512, 512, device=dev)
    with torch.autograd.profiler.record_function("worker_matmul"):
        for _ in range(3):
            a = a @ a
            a = a / a.norm()
    torch.cuda.synchronize()


with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                        torch.profiler.ProfilerActivity.CUDA]) as prof:
    for i in range(3):
        with torch.autograd.profiler.record_function("train_iter"):
            g.replay()
            z = y.sum()
            torch.cuda.synchronize()
    t = threading.Thread(target=worker)
    t.start()
    t.join()
prof.export_chrome_trace(sys.argv[1])
