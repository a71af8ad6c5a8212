"""A torchvision ResNet (random init) training step with AMP and SGD - by default
ResNet-50 at batch 64, the workload of the H100 fixtures - for the application
energy breakdown and the test-data captures.

  python resnet_step.py trace OUT.json [MODEL BATCH SECONDS]
        SECONDS (3) of steps, then the torch profiler around 3 steps (wait 1, warmup 1, active 1)
  python resnet_step.py ncu [MODEL BATCH]
        3 warm-up steps, then one step between cudaProfilerStart/Stop (ncu --profile-from-start off)
"""
import sys
import time

import torch
import torchvision

mode = sys.argv[1]
rest = sys.argv[3:] if mode == "trace" else sys.argv[2:]
arch, batch = (rest[0], int(rest[1])) if len(rest) >= 2 else ("resnet50", 64)
seconds = float(rest[2]) if len(rest) >= 3 else 3.0
torch.manual_seed(0)
model = getattr(torchvision.models, arch)().cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
scaler = torch.amp.GradScaler()
x = torch.randn(batch, 3, 224, 224, device="cuda")
y = torch.randint(0, 1000, (batch,), device="cuda")


def step():
    opt.zero_grad(set_to_none=True)
    with torch.autocast("cuda", dtype=torch.float16):
        loss = torch.nn.functional.cross_entropy(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()


if mode == "ncu":
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    step()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
else:
    t = time.time()
    while time.time() - t < seconds:
        step()
    torch.cuda.synchronize()
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=acts, schedule=torch.profiler.schedule(wait=1, warmup=1, active=1),
                                record_shapes=True) as prof:
        for _ in range(3):
            step()
            prof.step()
    torch.cuda.synchronize()
    prof.export_chrome_trace(sys.argv[2])
