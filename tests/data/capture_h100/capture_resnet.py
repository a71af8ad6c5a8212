"""Train torchvision ResNet-18 (random init, AMP, SGD momentum 0.9) under
tracedb.capture: the capture that wrote tests/data/capture_h100/.

    python capture_resnet.py OUT [BATCH]        (tracedb capture -o OUT [--ncu] -- python capture_resnet.py OUT)

The input batch lives in pageable host memory and the labels in pinned memory,
so each step copies HtoD from both kinds (the transfers report's two rows).
"""
import sys
import time

import torch
import torch.nn.functional as F
import torchvision

import tracedb


def main(out, batch):
    torch.manual_seed(0)
    # cuDNN's heuristics, not its timing-based autotuning: the ncu pass (whose timings ncu
    # distorts) then runs the same kernels as the traced run
    torch.backends.cudnn.benchmark = False
    model = torchvision.models.resnet18().cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    scaler = torch.amp.GradScaler()
    x_host = torch.randn(batch, 3, 224, 224)                            # pageable
    y_host = torch.randint(0, 1000, (batch,)).pin_memory()              # pinned

    def step():
        x = x_host.to("cuda", non_blocking=True)
        y = y_host.to("cuda", non_blocking=True)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    for _ in range(5):                # warm-up outside the capture
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(20):
        step()
    torch.cuda.synchronize()
    print(f"batch {batch}: {20 * batch / (time.perf_counter() - t0):.0f} samples/s outside the profiler",
          file=sys.stderr)
    with tracedb.capture(out, steps=3, warmup=2, wait=1, batch_size=batch, run=f"resnet18_bs{batch}") as cap:
        while not cap.done:
            step()
            cap.step()
        torch.cuda.synchronize()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 64)
