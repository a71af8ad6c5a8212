"""Train torchvision ResNet-50 (random init, AMP float16 + GradScaler, SGD momentum 0.9,
cuDNN autotuning off) with a batch that fills most of the GPU's memory, fed by a
DataLoader in the training process, under tracedb.capture: the capture that wrote
tests/data/capture_h200/.

    python capture_fill.py OUT [FILL]     -> OUT/resnet50_bsN/ (FILL: share of the device, default 0.65)

The batch is sized on the GPU before the capture, as memory_summary's est_batch_scale_x
reasons: two steps at batches 64 and 128 give the memory a sample adds and what stays
(weights, gradients, momentum); the batch is the largest multiple of 64 whose peak
allocated memory is FILL of the device, and at most 2624, so that no activation tensor
reaches 2^31 elements (64 x 112 x 112 per sample after the first convolution, as after
layer1: beyond, kernels need 64-bit indexing or split the batch). A step that runs out
of memory lowers the batch by 15%.

The DataLoader (num_workers=0, pageable memory) makes each sample on the CPU with NumPy
(random 8-bit pixels, normalized: a stand-in for decoding, and no profiler events per
sample), so the GPU waits for the host in every step: a job whose memory is full and
whose GPU is idle, where a larger batch cannot help.
"""
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
import torchvision

import tracedb

INT32_BATCH = (2 ** 31 - 1) // (64 * 112 * 112) // 64 * 64       # 2624


class Samples(torch.utils.data.Dataset):
    """Random 224x224 images made with some CPU work per sample (a stand-in for decoding)."""
    def __len__(self):
        return 1 << 24

    def __getitem__(self, i):
        pixels = np.random.default_rng(i).integers(0, 256, (3, 224, 224), dtype=np.uint8)
        return (pixels.astype(np.float32) - 127.5) / 64.0, i % 1000


def main(out, fill):
    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = False
    model = torchvision.models.resnet50().cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    scaler = torch.amp.GradScaler()

    def step(x, y):
        x = x.to("cuda", non_blocking=True)
        y = y.to("cuda", non_blocking=True)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    total = torch.cuda.get_device_properties(0).total_memory
    peaks = {}
    for b in (64, 128, 64, 128):          # the second pair: after cuDNN's and the optimizer's first calls
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        step(torch.randn(b, 3, 224, 224, device="cuda"), torch.randint(0, 1000, (b,), device="cuda"))
        torch.cuda.synchronize()
        peaks[b] = torch.cuda.max_memory_allocated()
    per_sample = (peaks[128] - peaks[64]) / 64
    fixed = peaks[64] - 64 * per_sample
    batch = min(INT32_BATCH, int((fill * total - fixed) / per_sample) // 64 * 64)
    print(f"device {total / 2**30:.1f} GiB; {per_sample / 2**20:.1f} MiB a sample, {fixed / 2**30:.2f} GiB fixed "
          f"-> batch {batch} (peak allocated ~{100 * (fixed + batch * per_sample) / total:.0f}% of the device)",
          file=sys.stderr, flush=True)
    torch.cuda.empty_cache()

    while True:
        loader = torch.utils.data.DataLoader(Samples(), batch_size=batch, num_workers=0)
        batches = iter(loader)
        try:
            step(*next(batches))          # warm-up at the full batch
            torch.cuda.synchronize()
            break
        except torch.OutOfMemoryError:
            batch = batch * 85 // 100 // 64 * 64
            print(f"out of memory: batch {batch}", file=sys.stderr, flush=True)
            torch.cuda.empty_cache()
    step(*next(batches))
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(3):
        step(*next(batches))
    torch.cuda.synchronize()
    print(f"batch {batch}: {3 * batch / (time.perf_counter() - t0):.0f} samples/s outside the profiler; "
          f"peak allocated {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB, "
          f"reserved {torch.cuda.max_memory_reserved() / 2**30:.1f} GiB of {total / 2**30:.1f}",
          file=sys.stderr, flush=True)
    name = f"resnet50_bs{batch}"
    with tracedb.capture(os.path.join(out, name), steps=2, warmup=1, wait=1, batch_size=batch, run=name, ingest=False) as cap:
        while not cap.done:
            step(*next(batches))
            cap.step()
        torch.cuda.synchronize()


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 0.65)
