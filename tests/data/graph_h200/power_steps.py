"""(d) An NVML log (tracedb's power_log.Sampler, every 5 ms, GPU 0: power, the energy
counter nvmlDeviceGetTotalEnergyConsumption, instant power, clocks) around an eager
training step of a bf16 MLP sized to ~50 ms a step (batch 16384): 0.5 s idle, 3 s of steps outside
the profiler, then 8 profiled steps (wait 1, warmup 1, active 6), 0.5 s idle.
Usage: power_steps.py OUT_TRACE.json OUT_POWER.csv"""
import sys
import time

import torch

from common import Power, profiled, timed

torch.manual_seed(0)
dev = "cuda"
D, B = 8192, 16384
model = torch.nn.Sequential(*[m for _ in range(4) for m in (torch.nn.Linear(D, D), torch.nn.GELU())]).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=1e-4)
x = torch.randn(B, D, device=dev)


def step():
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(x).float().pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


for _ in range(3):
    step()
print("power_steps step ms: %.3f" % (1e3 * timed(step, 5)))
with Power(sys.argv[2], interval_ms=5):
    t = time.perf_counter()
    while time.perf_counter() - t < 3.0:
        step()
    torch.cuda.synchronize()
    profiled(8, step, sys.argv[1], wait=1, warmup=1, active=6)
