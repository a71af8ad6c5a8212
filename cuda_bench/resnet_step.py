"""ResNet-50 (torchvision, random init) training step, batch 64, AMP, SGD - the
workload of the H100 fixtures - for the application energy breakdown.

  python resnet_step.py trace OUT.json   ~3 s of steps, then the torch profiler
                                          around 3 steps (wait 1, warmup 1, active 1)
  python resnet_step.py ncu              3 warm-up steps, then one step between
                                          cudaProfilerStart/Stop (for ncu --profile-from-start off)
"""
import sys
import time

import torch
import torchvision

torch.manual_seed(0)
model = torchvision.models.resnet50().cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
scaler = torch.amp.GradScaler()
x = torch.randn(64, 3, 224, 224, device="cuda")
y = torch.randint(0, 1000, (64,), device="cuda")


def step():
    opt.zero_grad(set_to_none=True)
    with torch.autocast("cuda", dtype=torch.float16):
        loss = torch.nn.functional.cross_entropy(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()


if sys.argv[1] == "ncu":
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    step()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
else:
    t = time.time()
    while time.time() - t < 3:
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
