"""Sample NVML power and energy of every GPU until SIGTERM/SIGINT.

  python3 nvml_power.py OUT.csv [INTERVAL_MS]

CSV columns: timestamp_ns (time.time_ns() on the host, epoch), gpu (NVML index),
power_mw (nvmlDeviceGetPowerUsage), energy_mj (nvmlDeviceGetTotalEnergyConsumption,
millijoules since the driver was loaded). Each row is flushed as written."""
import signal
import sys
import time

import pynvml

stop = False


def _stop(*_):
    global stop
    stop = True


signal.signal(signal.SIGTERM, _stop)
signal.signal(signal.SIGINT, _stop)
out = sys.argv[1]
interval = (float(sys.argv[2]) if len(sys.argv) > 2 else 10.0) / 1000
pynvml.nvmlInit()
handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
with open(out, "w", buffering=1) as f:
    f.write("timestamp_ns,gpu,power_mw,energy_mj\n")
    nxt = time.perf_counter()
    while not stop:
        for i, h in enumerate(handles):
            p = pynvml.nvmlDeviceGetPowerUsage(h)
            e = pynvml.nvmlDeviceGetTotalEnergyConsumption(h)
            f.write(f"{time.time_ns()},{i},{p},{e}\n")
        nxt += interval
        time.sleep(max(0.0, nxt - time.perf_counter()))
pynvml.nvmlShutdown()
