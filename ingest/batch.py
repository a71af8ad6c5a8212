"""An ingest of many paths: what `tracedb ingest PATH...`, `TraceDB.ingest` and a
capture's own load all do, here once.

The paths become groups (ingest/jobs.py: a capture folder is its files, another
directory one job of rank traces); several traces load at once, each on a thread
and a cursor of its own (ingest/parallel.py); then each file that pairs with a trace (an ncu report, a
power or host log) pairs with its capture folder's trace, with --pair-with's, or
with the one trace that can be its own (ingest/autopair.py). Nothing is printed:
each file's Outcome carries the lines a person reads, and on_outcome(outcome)
gets them as they come (a long multi-file ingest shows its progress).
"""
import os
from dataclasses import dataclass, field

from ..store.sql import scalar
from . import IngestResult, autopair, ingest_file
from .capture_folder import note_manifest
from .errors import IngestError
from .jobs import settle
from .registry import detect


@dataclass
class Outcome:
    path: str
    result: IngestResult = None      # None: the file was not loaded
    lines: list = field(default_factory=list)     # (level, text): info | error

    @property
    def failed(self):
        return any(level == "error" for level, _ in self.lines)


def match_line(m):
    """One line on a match (a match_runs row): how many ncu kernels were paired."""
    it = "the whole run" if m["iteration"] is None else f"iteration {m['iteration']}"
    if m["iteration"] is not None and m.get("nvtx_step") == m["iteration"]:
        it += " (the step ncu's NVTX ranges name)"
    pct = 100.0 * m["matched"] / m["ncu_kernels"] if m["ncu_kernels"] else 0.0
    names = (f"; {m['name_mismatches']} of them ({m['name_mismatch_pct']:.1f}%) under another name"
             + (": FORCED, its counters are not this trace's" if m.get("forced") else "")
             if m.get("name_mismatches") else "")
    return (f"matched {m['matched']} of {m['ncu_kernels']} ncu kernels ({pct:.1f}%) with the "
            f"{m['trace_kernels']} kernels of {m['trace_run']} {it} in {m['seconds']:.2f} s{names} "
            f"(details: tracedb query match_quality --run {m['trace_run']})")


def loaded_lines(con, path, r):
    """What a person reads of a file just ingested (or skipped as a duplicate)."""
    if r.status == "skipped":
        return [("info", f"skipped {path}: {r.message}")]
    reader = detect(path)[0]           # the reader that loaded it (a trace may be Kineto's or nsys's)
    return ([("info", f"loaded {path} as run {r.run} ({reader.summary(con, r.run)})")]
            + [("info", note) for note in reader.notes(con, path, r.run)])


def traces_at_once(items, run=None, jobs=None):
    """The (trace file, options) items loaded at once (ingest/parallel.py): with jobs > 1
    every trace file; by default those of a directory (the ranks of a job), when
    there are several."""
    if run or len(items) < 2 or jobs == 1 or (os.cpu_count() or 1) == 1:
        return []
    if jobs is None:       # by default the traces of a directory (a job's ranks); files one by one
        items = [(p, t) for p, t in items if t.get("require_rank")]
    out = []
    for p, t in items:
        try:
            if os.path.isfile(p) and detect(p)[0].kind == "trace" and not str(p).endswith(".xplane.pb"):
                out.append((p, t))
        except IngestError:
            pass                    # reported by the one-by-one path
    return out if len(out) > 1 else []


def ingest_groups_into(con, groups, run=None, pair_with=None, jobs=None, options=None, on_outcome=None):
    """Ingest the (files, options) groups of ingest/jobs.ingest_groups into con; a list
    of Outcome, one per file, in the order they landed (traces first)."""
    options = options or {}
    outcomes = []

    def done(outcome):
        outcomes.append(outcome)
        if on_outcome:
            on_outcome(outcome)

    items = [(f, t) for files, t in groups for f in files]
    kinds = {p: autopair.pairs(p) for p, _ in items}
    command_traces = []        # trace runs of this command: the ncu reports and logs pair with them
    capture_traces = {}        # capture folder -> its trace run: the folder's logs and report pair with it
    folders = {p: t.get("capture") for p, t in items}

    def trace_landed(r, counts=True):
        if counts:
            command_traces.append(r.run)
        if folders.get(r.path):
            capture_traces[folders[r.path]] = r.run
            note_manifest(con, folders[r.path], r.run)

    parallel = traces_at_once(items, run, jobs)
    if parallel:        # several traces at once, then the files that pair with them
        from .parallel import ingest_traces

        def landed(r):
            if isinstance(r, tuple):
                done(Outcome(r[0], None, [("error", r[1])]))
                return
            done(Outcome(r.path, r, loaded_lines(con, r.path, r)))
            trace_landed(r, counts=r.status == "loaded")
        ingest_traces(con, parallel, jobs=jobs, report=landed, options=options)
        items = [it for it in items if it not in parallel]
    for path, trace in sorted(items, key=lambda it: kinds[it[0]] is not None):     # traces first
        trace = dict(trace)
        folder = trace.pop("capture", None)
        target, why = pair_with, None
        if folder and kinds[path]:       # the folder's own trace, never another (nor --pair-with's)
            if folder not in capture_traces:
                done(Outcome(path, None, [("error", f"{path}: not loaded: the trace of its capture folder "
                                                    "did not load")]))
                continue
            target, why = capture_traces[folder], "the trace of its capture folder"
        elif kinds[path] and target is None:
            target, why = autopair.before(con, command_traces)
        try:
            try:
                r = ingest_file(con, path, run=run, pair_with=target, options={**options, **trace})
            except IngestError as e:
                if not (why and not folder and ": refused: " in str(e)):
                    raise
                # a pairing tracedb chose itself, refused (the kernels disagree in name): load unpaired
                r = ingest_file(con, path, run=run, pair_with=None, options={**options, **trace})
                done(Outcome(path, r, loaded_lines(con, path, r)
                             + [("info", f"not paired with {target} ({why}): {str(e).split(': refused: ', 1)[1]}")]))
                continue
            if r.kind == "trace":
                trace_landed(r)
        except IngestError as e:
            done(Outcome(path, None, [("error", str(e))]))
            continue
        out = Outcome(path, r, loaded_lines(con, path, r))
        if kinds[path] and target is None and r.status == "loaded":
            try:
                r.pairing, line = autopair.after(con, path, r.run, r.kind, command_traces, options)
            except IngestError as e:
                out.lines.append(("error", str(e)))
                done(out)
                continue
            out.lines.append(("info", line))
            target = r.pairing and scalar(con, "SELECT paired_run FROM runs WHERE run = ?", [r.run])
        elif why and r.pairing:
            out.lines.append(("info", f"paired {r.run} with trace {target} ({why})"))
        if r.match:
            out.lines.append(("info", match_line(r.match)))
        elif r.pairing:
            out.lines.append(("info", r.pairing))
        if r.pairing and target:
            note = autopair.others(con, r.run, r.kind, target)
            if note:
                out.lines.append(("info", note))
        done(out)
    for files, t in groups:           # each directory loaded as a job: one job, several told apart, or refused
        if not t.get("require_rank") or not files:
            continue
        directory = os.path.dirname(files[0]) or "."
        try:
            note = settle(con, directory, t["job"])
        except IngestError as e:
            done(Outcome(directory, None, [("error", str(e))]))
            continue
        if note:
            done(Outcome(directory, None, [("info", note)]))
    return outcomes
