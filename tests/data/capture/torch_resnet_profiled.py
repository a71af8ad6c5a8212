"""torchvision resnet18, batch 32, AMP: ~2 s of training, then the torch profiler
around three steps (wait 1, warmup 1, active 1). Usage: OUT.json"""
import sys
import time

import torch
import torchvision

model = torchvision.models.resnet18().cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
scaler = torch.amp.GradScaler()
x = torch.randn(32, 3, 224, 224, device="cuda")
y = torch.randint(0, 1000, (32,), device="cuda")


def step():
    opt.zero_grad(set_to_none=True)
    with torch.autocast("cuda", dtype=torch.float16):
        loss = torch.nn.functional.cross_entropy(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()


t = time.time()
while time.time() - t < 2:
    step()
torch.cuda.synchronize()
acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
with torch.profiler.profile(activities=acts, schedule=torch.profiler.schedule(wait=1, warmup=1, active=1),
                            record_shapes=True) as prof:
    for _ in range(3):
        step()
        prof.step()
torch.cuda.synchronize()
prof.export_chrome_trace(sys.argv[1])
