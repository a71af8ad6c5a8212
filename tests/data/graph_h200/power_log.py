"""`tracedb power-log`: sample NVML while a command runs, to a CSV that
`tracedb ingest` reads (the format of the power fixtures, plus gpu, phase and
the system columns: utilization, memory, throttle reasons, PCIe).

A background thread (Sampler) samples every --interval-ms and writes each row as
it goes (flushed, so nothing is lost if the process is killed). Idle power is
recorded for --idle-s before the command starts and after it ends (phase
idle_before / idle_after); energy_summary takes idle power from those samples.
`tracedb.capture` runs the same Sampler beside torch.profiler.
"""
import csv
import subprocess
import threading
import time

COLUMNS = ["timestamp_ns", "gpu", "power_mw", "energy_mj", "instant_power_mw", "sm_clock_mhz",
           "mem_clock_mhz", "temp_c", "phase", "gpu_util_pct", "mem_util_pct", "mem_used_bytes",
           "mem_total_bytes", "throttle_reasons", "pcie_tx_kb_per_s", "pcie_rx_kb_per_s"]
# nvmlDeviceGetPcieThroughput blocks for its 20 ms window: a thread of its own reads it
# (every GPU, tx and rx, then this pause) and the sample loop writes each new reading once.
PCIE_PAUSE_S = 0.05


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
    """A function returning one sample row (without timestamp, gpu, phase) of GPU index."""
    h = nv.nvmlDeviceGetHandleByIndex(index)

    def opt(f, *a):
        try:
            return f(*a)
        except (nv.NVMLError, AttributeError):
            return None

    def instant():
        fid = getattr(nv, "NVML_FI_DEV_POWER_INSTANT", None)
        if fid is None:
            return None
        v = opt(nv.nvmlDeviceGetFieldValues, h, [fid])
        if not v or v[0].nvmlReturn != 0:
            return None
        return v[0].value.uiVal

    reasons = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
        getattr(nv, "nvmlDeviceGetCurrentClocksThrottleReasons", None)

    def read():
        util = opt(nv.nvmlDeviceGetUtilizationRates, h)
        mem = opt(nv.nvmlDeviceGetMemoryInfo, h)
        return [opt(nv.nvmlDeviceGetPowerUsage, h), opt(nv.nvmlDeviceGetTotalEnergyConsumption, h),
                instant(), opt(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM),
                opt(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_MEM),
                opt(nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU),
                util.gpu if util else None, util.memory if util else None,
                mem.used if mem else None, mem.total if mem else None,
                opt(reasons, h) if reasons else None]
    return read


def _pcie_reader(nv, index):
    """(tx, rx) KB/s of GPU index over NVML's 20 ms window each (blocks ~40 ms), or Nones."""
    h = nv.nvmlDeviceGetHandleByIndex(index)

    def read():
        out = []
        for counter in (nv.NVML_PCIE_UTIL_TX_BYTES, nv.NVML_PCIE_UTIL_RX_BYTES):
            try:
                out.append(nv.nvmlDeviceGetPcieThroughput(h, counter))
            except (nv.NVMLError, AttributeError):
                out.append(None)
        return out
    return read


class Sampler:
    """NVML samples of every chosen GPU, written to a CSV by a background thread."""

    def __init__(self, output, interval_ms=10, gpus=None, on_sample=None):
        self.nv = _nvml()
        indices = gpus if gpus is not None else list(range(self.nv.nvmlDeviceGetCount()))
        if not indices:
            self.nv.nvmlShutdown()
            raise PowerLogError("NVML sees no GPU")
        self.readers = [(i, _reader(self.nv, i)) for i in indices]
        self.pcie = {i: _pcie_reader(self.nv, i) for i in indices}
        self._pcie_new = {}
        self.output, self.interval_ms, self.on_sample = output, interval_ms, on_sample
        self.phase, self._stop, self._thread = "idle_before", False, None

    def _pcie_loop(self):
        while not self._stop:
            for i, read in self.pcie.items():
                tx, rx = read()
                if tx is None and rx is None:
                    return                       # not available on this GPU or driver
                self._pcie_new[i] = (tx, rx)
            time.sleep(PCIE_PAUSE_S)

    def _loop(self, w, f):
        period = self.interval_ms / 1000
        nxt = time.perf_counter()
        while not self._stop:
            for i, read in self.readers:
                sample = read()
                pcie = self._pcie_new.pop(i, (None, None))
                w.writerow([time.time_ns(), i, *sample[:6], self.phase, *sample[6:], *pcie])
            f.flush()
            if self.on_sample:
                self.on_sample()
            nxt += period
            time.sleep(max(0.0, nxt - time.perf_counter()))

    def start(self):
        self._file = open(self.output, "w", newline="")
        w = csv.writer(self._file)
        w.writerow(COLUMNS)
        self._thread = threading.Thread(target=self._loop, args=(w, self._file), daemon=True)
        self._thread.start()
        self._pcie_thread = threading.Thread(target=self._pcie_loop, daemon=True)
        self._pcie_thread.start()
        return self

    def stop(self):
        self._stop = True
        if self._thread:
            self._thread.join()
            self._pcie_thread.join()
            self._file.close()
        self.nv.nvmlShutdown()


def record(output, command, interval_ms=10, gpus=None, idle_s=0.5, on_sample=None):
    """Sample while `command` runs (None: until Ctrl-C). Returns the command's exit status."""
    s = Sampler(output, interval_ms, gpus, on_sample).start()
    rc = 0
    try:
        time.sleep(idle_s)
        s.phase = "run"
        if command:
            rc = subprocess.call(command)
        else:
            while True:
                time.sleep(1)
    except KeyboardInterrupt:
        rc = 130
    finally:
        s.phase = "idle_after"
        try:
            time.sleep(idle_s)
        except KeyboardInterrupt:
            pass
        s.stop()
    return rc
