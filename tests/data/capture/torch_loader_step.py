"""ResNet-18 (10 classes, 96x96, batch 64 or $BATCH) fed by a DataLoader whose samples cost
CPU time, in two set-ups, for the findings fixtures:

  slow:  num_workers=0, pageable host memory, blocking .cuda(), fp32 with TF32 off,
         loss.item() every step (a sync inside the step)
  fixed: 4 workers, pinned memory, non_blocking copies, AMP fp16, channels_last,
         no .item()

  python torch_loader_step.py trace MODE OUT.json   torch profiler: wait 1, warmup 1, active 4
  python torch_loader_step.py ncu MODE              one step between cudaProfilerStart/Stop
"""
import os
import sys

import torch
import torchvision

what, mode = sys.argv[1], sys.argv[2]
fixed = mode == "fixed"
torch.manual_seed(0)
torch.backends.cudnn.allow_tf32 = fixed
torch.backends.cuda.matmul.allow_tf32 = fixed


class Samples(torch.utils.data.Dataset):
    """Random images made with some CPU work per sample (a stand-in for decoding)."""
    def __len__(self):
        return 1 << 20

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        x = torch.nn.functional.avg_pool2d(torch.rand(3, 192, 192, generator=g)[None], 2)[0]
        return (x - x.mean()) / x.std(), i % 10


loader = torch.utils.data.DataLoader(Samples(), batch_size=int(os.environ.get("BATCH", "64")), num_workers=4 if fixed else 0,
                                     pin_memory=fixed, persistent_workers=fixed)
model = torchvision.models.resnet18(num_classes=10).cuda()
if fixed:
    model = model.to(memory_format=torch.channels_last)
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
scaler = torch.amp.GradScaler(enabled=fixed)
batches = iter(loader)


def step():
    x, y = next(batches)
    x, y = x.cuda(non_blocking=fixed), y.cuda(non_blocking=fixed)
    if fixed:
        x = x.to(memory_format=torch.channels_last)
    opt.zero_grad(set_to_none=True)
    with torch.autocast("cuda", dtype=torch.float16, enabled=fixed):
        loss = torch.nn.functional.cross_entropy(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    if not fixed:
        print(f"loss {loss.item():.4f}")


for _ in range(5):
    step()
torch.cuda.synchronize()
if what == "ncu":
    torch.cuda.cudart().cudaProfilerStart()
    step()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
else:
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=acts, schedule=torch.profiler.schedule(wait=1, warmup=1, active=4),
                                record_shapes=True) as prof:
        for _ in range(6):
            step()
            prof.step()
    torch.cuda.synchronize()
    prof.export_chrome_trace(sys.argv[3])
