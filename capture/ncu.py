"""The Nsight Compute pass of `tracedb capture --ncu`: the script runs again under
ncu, limited to the NVTX range (capture.STEP_RANGE) of the step the reports
analyze by default, the trace's steady iteration (profile_step), with exactly
the counters tracedb's reports read
(metric_sources, filtered to what this GPU's ncu knows), clocks left alone
(--clock-control none). The report is exported to CSV (raw page, base units),
ingested into the capture's database and matched with the trace's same step.
"""
import json
import os
import shutil
import subprocess

from ..query import reports
from ..ingest.capture_folder import MANIFEST, CaptureError, manifest, note_manifest
from .session import DB_NAME, ENV_DIR, ENV_NCU, STEP_RANGE
from ..store.sql import scalar
from ..ingest.match import match, numbers_profiler_steps


def find_ncu(ncu=None):
    path = shutil.which(ncu or "ncu")
    if path is None:
        raise CaptureError(f"--ncu needs Nsight Compute's `{ncu or 'ncu'}` command, which is not on PATH "
                           "(install Nsight Compute, or give --ncu-path)")
    return path


def wanted_metrics(con):
    """Every counter metric_sources names (all priorities), sorted."""
    return sorted(r[0] for r in con.execute("SELECT DISTINCT metric FROM metric_sources").fetchall())


def known_bases(ncu):
    """Metric base names this machine's ncu knows for its GPU (`ncu --query-metrics`), or None."""
    try:
        done = subprocess.run([ncu, "--query-metrics"], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    return {line.split()[0].split(".")[-1] for line in done.stdout.splitlines()
            if line.strip() and "__" in line.split()[0]} or None


def choose(metrics, bases):
    """The metrics whose base name ncu knows (all of them when it could not say)."""
    if bases is None:
        return list(metrics)
    return [m for m in metrics if m.split(".")[0] in bases]


def profile_step(con, trace_run, m):
    """The step for ncu: the trace's steady iteration, which the per-iteration reports
    (and the HTML report) show by default, so they show its counters too. It is the
    ProfilerStep number the NVTX range carries, where the trace numbers its steps so
    and the step is an active one; else None."""
    try:
        first = int(m["wait"]) + int(m["warmup"])
        active = range(first, first + int(m["steps"]))
    except (KeyError, TypeError, ValueError):
        return None
    step = scalar(con, reports.STEADY_OF["run"], {"run": trace_run})
    return step if step in active and numbers_profiler_steps(con, trace_run, step) else None


def note_step(out, m, step):
    """The manifest with the step ncu profiles (ncu_step, ncu_range), written back:
    ingesting the folder again matches the report with that step."""
    m = dict(m, ncu_step=step, ncu_range=STEP_RANGE.format(step))
    with open(os.path.join(out, MANIFEST), "w") as f:
        json.dump(m, f, indent=1)
    return m


def command_line(ncu, metrics, nvtx_range, report_base, command):
    # "NAME": a start/end range of the default domain ("NAME/" would be a push/pop range)
    return [ncu, "--nvtx", "--nvtx-include", nvtx_range, "--clock-control", "none",
            "--metrics", ",".join(metrics), "--export", report_base, "--force-overwrite", *command]


def run(out, command, ncu=None, say=print):
    """Profile the steady step of `command` under ncu; ingest and match the report.
    Returns (ncu run, the match_runs row)."""
    from ..store import db
    from ..ingest import ingest_file
    ncu = find_ncu(ncu)
    m = manifest(out)
    con = db.connect(os.path.join(out, DB_NAME))
    try:
        trace_run = con.execute("SELECT run FROM runs WHERE kind = 'trace' ORDER BY ingested_at DESC LIMIT 1") \
            .fetchone()
        if trace_run is None:
            raise CaptureError(f"{out}: the capture's database holds no trace run")
        metrics = choose(wanted_metrics(con), known_bases(ncu))
        step = profile_step(con, trace_run[0], m)
        why = "the trace's steady step" if step is not None else \
            "the last active step: the trace names no steady ProfilerStep among the active ones"
        if step is None and not isinstance(m.get("ncu_step"), int):
            raise CaptureError(f"{out}: {MANIFEST} names no step for ncu (ncu_step)")
        m = note_step(out, m, m["ncu_step"] if step is None else step)
        note_manifest(con, out, trace_run[0])        # the trace's metadata names the step profiled
    finally:
        con.close()
    base = os.path.join(out, m["name"] + "_ncu")
    env = dict(os.environ, **{ENV_DIR: out, ENV_NCU: "1"})
    say(f"running the command again under Nsight Compute: the {len(metrics)} counters of metric_sources "
        f"over NVTX range {m['ncu_range']}, {why} (a few minutes)")
    done = subprocess.run(command_line(ncu, metrics, m["ncu_range"], base, command), env=env)
    if done.returncode != 0 or not os.path.exists(base + ".ncu-rep"):
        raise CaptureError(f"ncu exited with status {done.returncode} and wrote no {base}.ncu-rep")
    csv = base + "_raw.csv"
    with open(csv, "w") as f:
        exp = subprocess.run([ncu, "--import", base + ".ncu-rep", "--csv", "--page", "raw", "--print-units", "base"],
                             stdout=f, stderr=subprocess.PIPE, text=True)
    if exp.returncode != 0:
        raise CaptureError(f"ncu --import {base}.ncu-rep failed: {exp.stderr.strip().splitlines()[-1:]}")
    con = db.connect(os.path.join(out, DB_NAME))
    try:
        r = ingest_file(con, csv)
        row = match(con, trace_run[0], r.run, iteration=m["ncu_step"])
    finally:
        con.close()
    return r.run, row
