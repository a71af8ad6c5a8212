"""Capture the what-if validation pairs: a step A, the same step with one change made for real (B).

Usage (on a machine with one CUDA GPU):  python capture_whatif.py OUTDIR [PAIR ...]

For every pair and variant it writes OUTDIR/<pair>_<a|b>.json.gz (torch.profiler, Kineto JSON,
gzip -9) and adds to OUTDIR/summary.json the step time measured OUTSIDE the profiler (median of
30 steps, each timed with time.perf_counter_ns from its start to after its closing
torch.cuda.synchronize()).

Every step of every pair ends with torch.cuda.synchronize(): the step boundary, standing for the
per-step logging sync of a training loop; it is in A and in B, so the profiler's ProfilerStep#N
range of a step is the step's wall time. The pairs (what B changes):

  loader   DataLoader(num_workers=0) whose __getitem__ sleeps 3 ms per batch (A) / no sleep (B);
           then an 8-layer MLP training step (Linear 4096 + GELU, batch 4096,
           autocast bf16, cross-entropy, SGD).
  item     30 memory-bound fp32 ops on [8192, 8192] (GPU far behind the CPU), loss.item()
           (A only), then 200 tiny launches on a [64, 64] tensor.
  sync     24 layers (Linear 4096 + LayerNorm + GELU + residual add, bf16, batch 2048),
           torch.cuda.synchronize() after every layer (A) / none inside the step (B).
  graph    launch-bound inference (40 layers Linear 1024 + LayerNorm + GELU + add, batch 5120,
           bf16) run eagerly (A) / captured once in a CUDA graph and replayed (B).
  scale    one GEMM (record_function "scaled_gemm": [8192, K] @ [K, 8192] bf16) with K 8192 (A) /
           K 4096 (B), followed by the same 8 memory-bound fp32 ops on its [8192, 8192] output.
  hostgap  10 memory-bound fp32 ops, 3 ms of host Python work (record_function "host_prep", a
           busy loop), 20 more ops (A) / without the host work (B): queued GPU work hides part
           of the gap.
"""
import gzip
import json
import os
import shutil
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function, schedule

DEV = "cuda"
WAIT, WARMUP, ACTIVE = 1, 3, 6
TIMED = 30


def sync():
    torch.cuda.synchronize()


# --------------------------------------------------------------------------- the pairs
class Loader:
    """A training loop fed by a DataLoader whose fetch sleeps (A) or not (B)."""

    class DS(torch.utils.data.Dataset):
        def __init__(self, batches, sleep_s):
            self.batches, self.sleep_s = batches, sleep_s

        def __len__(self):
            return 10 ** 6

        def __getitem__(self, i):
            if self.sleep_s:
                time.sleep(self.sleep_s)   # the loader's wait: decoding, augmentation, I/O
            return self.batches[i % len(self.batches)]

    def __init__(self, variant):
        torch.manual_seed(0)
        d, n, layers = 4096, 4096, 8
        self.model = nn.Sequential(*[m for _ in range(layers) for m in (nn.Linear(d, d), nn.GELU())]).to(DEV)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=1e-3, momentum=0.9)
        batches = [(torch.randn(n, d, dtype=torch.bfloat16).pin_memory(),
                    torch.randint(0, d, (n,)).pin_memory()) for _ in range(2)]
        ds = self.DS(batches, 0.003 if variant == "a" else 0.0)
        # batch_size=None: each __getitem__ is one whole (pre-made) batch, so B's fetch is cheap
        self.loader = torch.utils.data.DataLoader(ds, batch_size=None, shuffle=False, num_workers=0)
        self.it = iter(self.loader)

    def step(self):
        x, y = next(self.it)
        x, y = x.to(DEV, non_blocking=True), y.to(DEV, non_blocking=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(self.model(x).float(), y)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        sync()


class Item:
    """GPU-bound step; A reads loss.item() in the middle, then launches 200 tiny kernels.

    The GPU-heavy part is memory-bound (fp32 elementwise ops on 256 MB tensors), not big GEMMs:
    GEMMs back to back draw enough power to lower the clock, so the same GEMM ran 5-13%
    slower in B than in A (first capture); memory-bound kernels keep their duration.
    """

    def __init__(self, variant):
        torch.manual_seed(0)
        self.variant = variant
        self.x = torch.randn(8192, 8192, device=DEV)
        self.s0 = torch.randn(64, 64, device=DEV)

    @torch.no_grad()
    def step(self):
        y = self.x
        for _ in range(15):             # ~4 ms of GPU work, launched in well under 1 ms
            y = torch.sin(y)
            y = y * 1.0001
        loss = y.mean()
        if self.variant == "a":
            v = loss.item()             # the per-step sync under test
        s = self.s0
        for i in range(100):            # many small launches after it
            s = torch.sin(s)
            s = s * 0.999
        s.add_(loss)
        sync()


class SyncEveryLayer:
    """24 layers; A synchronizes after each layer."""

    def __init__(self, variant):
        torch.manual_seed(0)
        d, n = 4096, 2048
        self.variant = variant
        self.lin = nn.ModuleList([nn.Linear(d, d) for _ in range(24)]).to(DEV, torch.bfloat16)
        self.ln = nn.ModuleList([nn.LayerNorm(d) for _ in range(24)]).to(DEV, torch.bfloat16)
        self.x = torch.randn(n, d, device=DEV, dtype=torch.bfloat16)

    @torch.no_grad()
    def step(self):
        x = self.x
        for lin, ln in zip(self.lin, self.ln):
            x = x + F.gelu(ln(lin(x)))
            if self.variant == "a":
                torch.cuda.synchronize()    # the sync under test
        sync()


class Launchy(nn.Module):
    def __init__(self, d=1024, layers=40):
        super().__init__()
        self.lin = nn.ModuleList([nn.Linear(d, d) for _ in range(layers)])
        self.ln = nn.ModuleList([nn.LayerNorm(d) for _ in range(layers)])

    def forward(self, x):
        for lin, ln in zip(self.lin, self.ln):
            x = x + F.gelu(ln(lin(x)))
        return x


class Graph:
    """Launch-bound inference: eager (A) or one CUDA graph replayed per step (B)."""

    def __init__(self, variant):
        torch.manual_seed(0)
        self.variant = variant
        self.model = Launchy().to(DEV, torch.bfloat16).eval()
        self.src = [torch.randn(5120, 1024, device=DEV, dtype=torch.bfloat16) for _ in range(2)]
        self.static_x = self.src[0].clone()
        self.i = 0
        if variant == "b":
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s), torch.no_grad():
                for _ in range(3):
                    self.model(self.static_x)
            torch.cuda.current_stream().wait_stream(s)
            self.g = torch.cuda.CUDAGraph()
            with torch.no_grad(), torch.cuda.graph(self.g):
                self.static_y = self.model(self.static_x)

    @torch.no_grad()
    def step(self):
        self.i += 1
        self.static_x.copy_(self.src[self.i % 2])
        if self.variant == "a":
            self.y = self.model(self.static_x)
        else:
            self.g.replay()
        sync()


class Scale:
    """One GEMM with K 8192 (A) or 4096 (B); the memory-bound rest of the step unchanged."""

    def __init__(self, variant):
        torch.manual_seed(0)
        n, k = 8192, 8192 if variant == "a" else 4096
        self.x = torch.randn(n, k, device=DEV, dtype=torch.bfloat16)
        self.w = torch.randn(k, n, device=DEV, dtype=torch.bfloat16) / k ** 0.5

    @torch.no_grad()
    def step(self):
        with record_function("scaled_gemm"):
            y = self.x @ self.w
        z = y.float()
        for _ in range(2):
            z = torch.softmax(z, dim=-1)
            z = F.layer_norm(z, (z.shape[-1],))
            z = F.gelu(z)
            z = z * 0.5
        sync()


class HostGap:
    """Memory-bound GPU work, 3 ms of host Python (A only), more GPU work.

    The host work starts while ~1.3 ms of GPU work is queued, so only part of it is exposed.
    """

    def __init__(self, variant):
        torch.manual_seed(0)
        self.variant = variant
        self.x = torch.randn(8192, 8192, device=DEV)

    @torch.no_grad()
    def step(self):
        y = self.x
        for _ in range(5):
            y = torch.sin(y)
            y = y * 1.0001
        if self.variant == "a":
            with record_function("host_prep"):
                end = time.perf_counter_ns() + 3_000_000
                n = 0
                while time.perf_counter_ns() < end:   # e.g. tokenizing, logging, bookkeeping
                    n += 1
        for _ in range(10):
            y = torch.sin(y)
            y = y * 1.0001
        sync()


PAIRS = {"loader": Loader, "item": Item, "sync": SyncEveryLayer, "graph": Graph,
         "scale": Scale, "hostgap": HostGap}


# --------------------------------------------------------------------------- measuring
def unprofiled(step):
    for _ in range(5):
        step()
    sync()
    times = []
    for _ in range(TIMED):
        t0 = time.perf_counter_ns()
        step()                      # ends with torch.cuda.synchronize()
        times.append(time.perf_counter_ns() - t0)
    return int(statistics.median(times)), times


def profiled(step, path):
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True,
                 with_stack=False, schedule=schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE, repeat=1)) as prof:
        for _ in range(WAIT + WARMUP + ACTIVE):
            step()
            prof.step()
    sync()
    raw = path[:-3]
    prof.export_chrome_trace(raw)
    with open(raw, "rb") as f, gzip.open(path, "wb", compresslevel=9) as g:
        shutil.copyfileobj(f, g)
    os.remove(raw)


def profiler_step_median_ns(path):
    with gzip.open(path, "rt") as f:
        ev = json.load(f)["traceEvents"]
    d = [round(e["dur"] * 1000) for e in ev if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")
         and e.get("cat") != "gpu_user_annotation"]
    return int(statistics.median(d)) if d else None, len(d)


def warm_gpu(seconds=2.0):
    a = torch.randn(8192, 8192, device=DEV, dtype=torch.bfloat16)
    end = time.time() + seconds
    while time.time() < end:
        for _ in range(20):
            a @ a
        sync()


def main():
    out = sys.argv[1]
    names = sys.argv[2:] or list(PAIRS)
    os.makedirs(out, exist_ok=True)
    summary = {"torch": torch.__version__, "cuda": torch.version.cuda, "gpu": torch.cuda.get_device_name(),
               "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "pairs": {}}
    warm_gpu()
    for name in names:
        for variant in ("a", "b"):
            key = f"{name}_{variant}"
            try:
                w = PAIRS[name](variant)
                for _ in range(3):
                    w.step()
                med, times = unprofiled(w.step)
                path = os.path.join(out, f"{key}.json.gz")
                profiled(w.step, path)
                prof_med, n = profiler_step_median_ns(path)
                summary["pairs"][key] = {"unprofiled_step_ns": med, "unprofiled_times_ns": times,
                                         "profiled_step_ns": prof_med, "profiler_steps": n,
                                         "trace_bytes": os.path.getsize(path)}
                print(f"{key:12s} unprofiled {med / 1e6:8.3f} ms  profiled {prof_med / 1e6:8.3f} ms "
                      f"({n} steps)  {os.path.getsize(path) / 1e6:.2f} MB", flush=True)
                del w
            except Exception as e:  # keep going: one broken pair must not cost the others
                summary["pairs"][key] = {"error": repr(e)}
                print(f"{key:12s} FAILED {e!r}", flush=True)
            torch.cuda.empty_cache()
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)


if __name__ == "__main__":
    main()
