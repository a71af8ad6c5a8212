"""A capture folder (what `tracedb capture` and `tracedb.capture` write): its
manifest, capture.json, names the trace, the NVML and host logs and the ncu report
of one profiled run. Reading one is an input like any other: `tracedb ingest prof/`,
the API and the capture's own load read it here."""
import json
import os

from ..errors import TracedbError
from ..store.sql import scalar

MANIFEST = "capture.json"


class CaptureError(TracedbError):
    """The capture cannot run: a missing dependency or a bad argument."""


def manifest(out):
    path = os.path.join(out, MANIFEST)
    if not os.path.exists(path):
        raise CaptureError(f"{out}: no {MANIFEST}: the command did not run a tracedb.capture(...) block to its end")
    try:
        with open(path) as f:
            m = json.load(f)
    except (OSError, ValueError) as e:
        raise CaptureError(f"{out}: {MANIFEST} is not a capture manifest: {e}") from None
    if not (isinstance(m, dict) and isinstance(m.get("name"), str) and isinstance(m.get("files"), dict)):
        raise CaptureError(f"{out}: {MANIFEST} is not a capture manifest (no name and files)")
    return m


def is_folder(path):
    """Whether path is a capture folder (it holds the manifest a capture writes)."""
    return os.path.isdir(path) and os.path.isfile(os.path.join(path, MANIFEST))


def folder_files(out, ncu=True):
    """The files of a capture folder to load, trace first: [(path, iteration)], where
    iteration is the step an ncu report profiled (its match is held to it), else None.
    A file may have been gzipped since (FILE.gz). The ncu report (with ncu) is the
    `--ncu` pass's raw CSV, or its .ncu-rep when there is no CSV."""
    m = manifest(out)
    files = m["files"]
    if not isinstance(files.get("trace"), str):
        raise CaptureError(f"{out}: the profiler wrote no trace (did the active steps run?)")

    def present(name):
        from .names import inside       # a name from the manifest stays in the folder
        try:
            path = inside(out, name, f"{MANIFEST} names a file")
            p = next((p for p in (path, path + ".gz") if os.path.exists(p)), None)
            return p and inside(out, os.path.basename(p), f"{MANIFEST} names a file")
        except ValueError as e:
            raise CaptureError(f"{out}: {e}") from None

    found = [(present(files[k]) if isinstance(files.get(k), str) else None, None) for k in ("trace", "power", "host")]
    if found[0][0] is None:
        raise CaptureError(f"{out}: its trace {files['trace']} is missing")
    if ncu:
        found.append((present(m["name"] + "_ncu_raw.csv") or present(m["name"] + "_ncu.ncu-rep"), m.get("ncu_step")))
    return [(p, it) for p, it in found if p]


def note_manifest(con, out, trace_run):
    """What the manifest knows better than the trace's own metadata, on the trace run:
    the batch size, where Kineto dropped the capture's metadata, and the step ncu
    profiles (tracedb_capture.ncu_step: the trace records the planned, last active
    step; `capture --ncu` profiles the steady one and rewrites the manifest). A
    manifest gone or broken since the folder was read (the trace is already loaded),
    or metadata that is not a JSON object, leaves the metadata as the trace wrote it."""
    try:
        m = manifest(out)
        meta = json.loads(scalar(con, "SELECT metadata FROM runs WHERE run = ?", [trace_run]) or "{}")
    except (CaptureError, ValueError):
        return
    if not isinstance(meta, dict):
        return
    new = dict(meta)
    if m.get("batch_size") is not None and meta.get("batch_size") is None:
        new["batch_size"] = str(m["batch_size"])
    step = m.get("ncu_step")
    if isinstance(step, int) and not isinstance(step, bool):
        cap = meta.get("tracedb_capture")
        if isinstance(cap, str):         # Kineto may keep the member as JSON text
            try:
                cap = json.loads(cap)
            except ValueError:
                cap = None
        new["tracedb_capture"] = dict(cap if isinstance(cap, dict) else {}, ncu_step=step)
    if new != meta:
        con.execute("UPDATE runs SET metadata = ? WHERE run = ?", [json.dumps(new), trace_run])
