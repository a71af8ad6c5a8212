"""Shared bits of the graph_h200 capture scripts: the profiler and the NVML sampler."""
import os
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile, schedule

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import power_log  # noqa: E402  (a copy of tracedb/power_log.py: the same CSV columns)


def profiled(n_steps, step, trace_path, wait=1, warmup=1, active=3):
    """Run step() wait+warmup+active times under torch.profiler; export the trace."""
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True,
                 schedule=schedule(wait=wait, warmup=warmup, active=active)) as prof:
        for _ in range(wait + warmup + active):
            step()
            prof.step()
    torch.cuda.synchronize()
    prof.export_chrome_trace(trace_path)


def timed(step, n):
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        step()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / n


class Power:
    def __init__(self, path, interval_ms=5, idle_s=0.5):
        self.s = power_log.Sampler(path, interval_ms, gpus=[0])
        self.idle_s = idle_s

    def __enter__(self):
        self.s.start()
        time.sleep(self.idle_s)
        self.s.phase = "run"
        return self

    def __exit__(self, *a):
        torch.cuda.synchronize()
        self.s.phase = "idle_after"
        time.sleep(self.idle_s)
        self.s.stop()
