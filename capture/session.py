"""`tracedb.capture`: profile a training loop in one step.

    with tracedb.capture("prof/", steps=3, warmup=2, batch_size=64) as cap:
        for batch in loader:
            train_step(batch)
            cap.step()
            if cap.done:
                break

runs torch.profiler (record_shapes, profile_memory, a wait/warmup/active
schedule), tracedb's NVML sampler on every visible GPU (power_log.Sampler) and
the host sampler (host_log.HostSampler) beside it, marks each step with an
NVTX start/end range `tracedb_step_N` (N = the ProfilerStep number), and at the end
ingests the trace, the NVML log and the host log into `prof/tracedb.duckdb`,
paired, and prints the run's summary.

`tracedb capture -o DIR [--ncu] -- python train.py` runs a script that calls
tracedb.capture with the environment variable TRACEDB_CAPTURE_DIR=DIR (it
overrides the folder the script names). With --ncu the command then runs the
script a second time under Nsight Compute with TRACEDB_CAPTURE_NCU=1: in that
pass capture() only marks the NVTX ranges, and ncu profiles the kernels of the
steady step's range (ncu_capture.py).
"""
import json
import os
import sys
import time

from ..ingest.capture_folder import MANIFEST, CaptureError, folder_files

ENV_DIR = "TRACEDB_CAPTURE_DIR"
ENV_NCU = "TRACEDB_CAPTURE_NCU"
STEP_RANGE = "tracedb_step_{}"
DB_NAME = "tracedb.duckdb"


def _torch():
    try:
        import torch
        import torch.profiler  # noqa: F401
    except ImportError:
        raise CaptureError("tracedb.capture needs PyTorch (pip install torch): it runs torch.profiler") from None
    return torch


def _nvtx(torch):
    """(start, end) of process-wide NVTX start/end ranges, no-ops without CUDA. Not
    push/pop ranges: those belong to one thread, and autograd launches the backward
    pass's kernels from a thread of its own, which ncu's filter would then leave out."""
    if torch.cuda.is_available():
        return torch.cuda.nvtx.range_start, torch.cuda.nvtx.range_end
    return (lambda name: None), (lambda rid: None)


class Capture:
    """The context manager tracedb.capture returns; call step() after every training step."""

    def __init__(self, out, steps=3, warmup=2, wait=1, batch_size=None, run=None, interval_ms=10,
                 host_interval_ms=50, gpus=None, nvml=True, host=True, ingest=True, idle_s=0.3, quiet=False):
        if steps < 1 or warmup < 0 or wait < 0:
            raise CaptureError(f"steps must be >= 1 and warmup, wait >= 0 (got steps={steps}, "
                               f"warmup={warmup}, wait={wait})")
        self.out = os.environ.get(ENV_DIR) or str(out)
        self.ncu_pass = os.environ.get(ENV_NCU) == "1"
        self.steps, self.warmup, self.wait, self.batch_size = steps, warmup, wait, batch_size
        self.name = run or os.path.basename(os.path.abspath(self.out)) or "capture"
        from ..ingest.names import path_name_problem  # the prefix of its files in the folder, its runs' names
        if why := path_name_problem(self.name, "run" if run else "run (the folder's name)"):
            raise CaptureError(why)
        self.interval_ms, self.host_interval_ms, self.gpus = interval_ms, host_interval_ms, gpus
        self.nvml, self.host, self.ingest, self.idle_s, self.quiet = nvml, host, ingest, idle_s, quiet
        self.n = 0
        self.db_path = os.path.join(self.out, DB_NAME)
        self.runs = {}
        self._prof = self._sampler = self._host = None
        self._open_range = False

    # -- files of the capture
    def path(self, suffix):
        return os.path.join(self.out, self.name + suffix)

    @property
    def total_steps(self):
        """Steps the schedule needs: wait + warmup + active."""
        return self.wait + self.warmup + self.steps

    @property
    def ncu_step(self):
        """The step Nsight Compute profiles unless the trace says otherwise: the last
        active one (warm). `tracedb capture --ncu` profiles the trace's steady step
        instead and writes that into the manifest (ncu_capture.profile_step)."""
        return self.total_steps - 1

    @property
    def done(self):
        return self.n >= self.total_steps

    def _say(self, text):
        if not self.quiet:
            print(f"tracedb capture: {text}", file=sys.stderr, flush=True)

    def __enter__(self):
        torch = _torch()
        os.makedirs(self.out, exist_ok=True)
        self._push, self._pop = _nvtx(torch)
        if not self.ncu_pass:
            self._start_samplers()
            try:
                self._start_profiler(torch)
            except BaseException:
                self._stop_samplers()
                raise
        self._range = self._push(STEP_RANGE.format(self.n))
        self._open_range = True
        return self

    def _start_samplers(self):
        if self.nvml:
            from .power_log import PowerLogError, Sampler
            try:
                self._sampler = Sampler(self.path("_power.csv"), self.interval_ms, self.gpus).start()
            except PowerLogError as e:
                raise CaptureError(f"NVML sampler: {e} (tracedb.capture(..., nvml=False) captures without it)") \
                    from None
        if self.host:
            from .host_log import HostLogError, HostSampler
            try:
                self._host = HostSampler(self.path("_host.csv"), self.host_interval_ms).start()
            except HostLogError as e:
                self._stop_samplers()
                raise CaptureError(f"host sampler: {e} (tracedb.capture(..., host=False) captures without it)") \
                    from None
        if self._sampler or self._host:
            time.sleep(self.idle_s)      # idle power before the steps
        if self._sampler:
            self._sampler.phase = "run"

    def _start_profiler(self, torch):
        from torch.profiler import ProfilerActivity, profile, schedule
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
        trace = self.path(".pt.trace.json.gz")
        for old in (trace, self.path("_ncu_raw.csv"), self.path("_ncu.ncu-rep")):    # an earlier capture's
            for p in (old, old + ".gz"):
                if os.path.exists(p):
                    os.remove(p)
        self._trace = trace
        self._prof = profile(activities=acts, schedule=schedule(wait=self.wait, warmup=self.warmup,
                                                                active=self.steps, repeat=1),
                             record_shapes=True, profile_memory=True,
                             on_trace_ready=lambda p: p.export_chrome_trace(trace))
        self._prof.__enter__()
        if self.wait + self.warmup == 0:
            self._add_metadata()

    def _add_metadata(self):
        """The capture's settings as top-level members of the trace (runs.metadata), added
        once the profiler records (Kineto keeps metadata of the session it is in)."""
        meta = {"steps": self.steps, "warmup": self.warmup, "wait": self.wait, "ncu_step": self.ncu_step}
        if self.batch_size is not None:
            self._prof.add_metadata("batch_size", str(int(self.batch_size)))
        self._prof.add_metadata_json("tracedb_capture", json.dumps(meta))

    def step(self):
        """End of one training step: closes its NVTX range and steps the profiler."""
        if self._open_range:
            self._pop(self._range)
            self._open_range = False
        self.n += 1
        if self._prof is not None:
            self._prof.step()
            if self.n == self.wait + self.warmup:       # the first active step begins
                self._add_metadata()
        if not self.done:
            self._range = self._push(STEP_RANGE.format(self.n))
            self._open_range = True

    def _stop_samplers(self):
        if self._sampler:
            self._sampler.phase = "idle_after"
            time.sleep(self.idle_s)
            self._sampler.stop()
        if self._host:
            self._host.stop()
        self._sampler = self._host = None

    def __exit__(self, exc_type, exc, tb):
        if self._open_range:
            self._pop(self._range)
            self._open_range = False
        if self.ncu_pass:
            return False
        try:
            if self._prof is not None:
                self._prof.__exit__(exc_type, exc, tb)
        finally:
            self._stop_samplers()
        if exc_type is not None:
            return False
        if self.n < self.wait + self.warmup + 1:
            raise CaptureError(f"only {self.n} steps ran: the schedule needs {self.total_steps} "
                               f"(wait {self.wait}, warmup {self.warmup}, active {self.steps}); call cap.step() "
                               "after every training step")
        self._write_manifest()
        if self.ingest:
            self.load()
            if not self.quiet:
                print(summary(self.db_path, self.runs["trace"]), flush=True)
        return False

    def _write_manifest(self):
        files = {"trace": self._trace if os.path.exists(self._trace) else None,
                 "power": self.path("_power.csv") if self.nvml else None,
                 "host": self.path("_host.csv") if self.host else None}
        with open(os.path.join(self.out, MANIFEST), "w") as f:
            json.dump({"name": self.name, "steps": self.steps, "warmup": self.warmup, "wait": self.wait,
                       "steps_run": self.n, "ncu_step": self.ncu_step, "ncu_range": STEP_RANGE.format(self.ncu_step),
                       "batch_size": self.batch_size, "files": {k: v and os.path.basename(v) for k, v in files.items()},
                       "database": DB_NAME}, f, indent=1)

    def load(self):
        """Ingest the capture's files into DIR/tracedb.duckdb, paired; fills self.runs."""
        self.runs = load_capture(self.out)
        return self.runs


def capture(out, steps=3, warmup=2, wait=1, **options):
    """Profile the steps of a training loop (see the module's docstring); call
    cap.step() after each step. options: batch_size, run, interval_ms,
    host_interval_ms, gpus, nvml, host, ingest, idle_s, quiet."""
    return Capture(out, steps=steps, warmup=warmup, wait=wait, **options)


def load_capture(out):
    """Ingest a capture folder's trace, NVML log and host log (and the ncu report
    when there is one) into OUT/tracedb.duckdb, paired; returns {kind: run}."""
    from ..ingest.batch import ingest_groups_into
    from ..store import db
    groups = [([f], {"capture": out, "iteration": it})
              for f, it in folder_files(out, ncu=False)]     # the --ncu pass loads its report itself (capture/ncu.py)
    con = db.connect(os.path.join(out, DB_NAME))
    try:
        outcomes = ingest_groups_into(con, groups, jobs=1)
    finally:
        con.close()
    for o in outcomes:
        if o.failed:
            raise CaptureError(next(t for level, t in o.lines if level == "error"))
    return {o.result.kind: o.result.run for o in outcomes}


def summary(db_path, run):
    """A few lines on the capture's steady iteration: time, utilization, memory, power."""
    from ..store import db
    from ..present.humanize import value
    from ..query import reports
    con = db.connect(db_path, read_only=True)
    try:
        lines = [f"captured run {run} into {db_path}"]
        for name in ("system_metrics", "memory_summary"):
            try:
                t = reports.run(con, name, {"run": run})
            except reports.ReportError as e:
                lines.append(f"  ({e})")
                continue
            for row in t.to_pylist()[:1]:
                lines += [f"  {k}: {value(k, v)}" for k, v in row.items() if v is not None and k != "run"]
        lines.append(f"more: tracedb reports; tracedb query system_metrics --db {db_path}")
        return "\n".join(lines)
    finally:
        con.close()

