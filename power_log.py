"""`tracedb power-log`: sample NVML power while a command runs, to a CSV that
`tracedb ingest` reads (the format of the power fixtures, plus gpu and phase).

A background thread samples every --interval-ms and writes each row as it goes
(flushed, so nothing is lost if the process is killed). Idle power is recorded
for --idle-s before the command starts and after it ends (phase idle_before /
idle_after); energy_summary takes idle power from those samples.
"""
import csv
import subprocess
import threading
import time

COLUMNS = ["timestamp_ns", "gpu", "power_mw", "energy_mj", "instant_power_mw", "sm_clock_mhz",
           "mem_clock_mhz", "temp_c", "phase"]


class PowerLogError(Exception):
    pass


def _nvml():
    try:
        import pynvml
    except ImportError:
        raise PowerLogError("needs NVML's Python bindings: pip install 'tracedb[capture]' "
                            "(nvidia-ml-py)") from None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as e:
        raise PowerLogError(f"NVML is not available on this machine ({e}): no NVIDIA driver or GPU") from None
    return pynvml


def _reader(nv, index):
    h = nv.nvmlDeviceGetHandleByIndex(index)

    def opt(f, *a):
        try:
            return f(*a)
        except nv.NVMLError:
            return None

    def instant():
        fid = getattr(nv, "NVML_FI_DEV_POWER_INSTANT", None)
        if fid is None:
            return None
        v = opt(nv.nvmlDeviceGetFieldValues, h, [fid])
        if not v or v[0].nvmlReturn != 0:
            return None
        return v[0].value.uiVal

    return lambda: [opt(nv.nvmlDeviceGetPowerUsage, h), opt(nv.nvmlDeviceGetTotalEnergyConsumption, h),
                    instant(), opt(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM),
                    opt(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_MEM),
                    opt(nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU)]


def record(output, command, interval_ms=10, gpus=None, idle_s=0.5, on_sample=None):
    """Sample while `command` runs (None: until Ctrl-C). Returns the command's exit status."""
    nv = _nvml()
    indices = gpus if gpus is not None else list(range(nv.nvmlDeviceGetCount()))
    if not indices:
        raise PowerLogError("NVML sees no GPU")
    readers = [(i, _reader(nv, i)) for i in indices]
    state = {"phase": "idle_before", "stop": False}

    def loop(w, f):
        period = interval_ms / 1000
        nxt = time.perf_counter()
        while not state["stop"]:
            for i, read in readers:
                w.writerow([time.time_ns(), i, *read(), state["phase"]])
            f.flush()
            if on_sample:
                on_sample()
            nxt += period
            time.sleep(max(0.0, nxt - time.perf_counter()))

    rc = 0
    with open(output, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        t = threading.Thread(target=loop, args=(w, f), daemon=True)
        t.start()
        try:
            time.sleep(idle_s)
            state["phase"] = "run"
            if command:
                rc = subprocess.call(command)
            else:
                while True:
                    time.sleep(1)
        except KeyboardInterrupt:
            rc = 130
        finally:
            state["phase"] = "idle_after"
            try:
                time.sleep(idle_s)
            except KeyboardInterrupt:
                pass
            state["stop"] = True
            t.join()
            nv.nvmlShutdown()
    return rc
