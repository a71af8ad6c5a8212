"""Jobs: the rank traces of one distributed training job.

A directory of rank traces (or traces given with --job) is one job; each
trace's rank comes from its distributedInfo or from --rank. The job, rank and
world size go on the runs row, and the distributed reports join ranks by job.
"""
import os

from ..store.sql import rows
from .errors import IngestError
from .registry import detect


def trace_files(directory):
    """The trace files of a directory (not its sub-directories), by name: every
    file a reader recognizes as a trace; other files (scripts, notes) are left out."""
    out = []
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if not os.path.isfile(path) or name.startswith("."):
            continue
        try:
            reader, _ = detect(path)
        except IngestError:
            continue
        if reader.kind == "trace":
            out.append(path)
    return out


def job_name(directory):
    """A directory's job name: its own name (`runs/ddp/` -> ddp)."""
    return os.path.basename(os.path.normpath(os.path.abspath(directory)))


def assign(con, path, fields, job=None, rank=None, require_rank=False):
    """Set rank and job on a trace run's fields (before its runs row is written).

    rank: --rank, for a trace without distributedInfo (or to confirm it).
    job: the job's name (--job, or the directory loaded); when absent, a trace
    with a rank belongs to the job named after its directory, and one without
    is a job of its own (job NULL). Two traces of one job with the same rank, or
    with different world sizes, are an error that names the file.
    """
    have = fields.get("rank")
    if rank is not None:
        if have is not None and have != rank:
            raise IngestError(path, f"--rank {rank}, but its distributedInfo says rank {have}")
        fields["rank"] = have = rank
    if have is None:
        if require_rank or job is not None:
            raise IngestError(path, "no rank: the trace has no distributedInfo.rank; load it alone "
                                    "with --rank N (and --job NAME) to make it a rank of a job")
        return fields
    job = job or job_name(os.path.dirname(os.path.abspath(path)))
    if why := clash(con, job, have, fields.get("world_size"), path if require_rank else None):
        raise IngestError(path, why)
    fields["job"] = job
    return fields


def clash(con, job, rank, world, path=None):
    """Why a trace of rank `rank` (world size `world`) cannot join job `job` in the
    database behind con (the rank is taken; another world size), or None. Also asked
    by each file of a folder ingest before its commit. With path (a trace of a
    directory loaded as a job), the runs of the same folder are left to settle(),
    which tells its jobs apart, or refuses the folder, once all are loaded."""
    for other, other_rank, other_world, other_path in rows(con, "SELECT run, rank, world_size, path FROM runs "
                                                                "WHERE kind = 'trace' AND job = ?", [job]):
        if path is not None and _same_folder(other_path, path):
            continue
        if other_rank == rank:
            return f"job {job!r} already has rank {rank} (run {other}); give --job NAME to load it as another job"
        if world is not None and other_world is not None and world != other_world:
            return (f"world size {world}, but job {job!r} has world size {other_world} "
                    f"(run {other}); give --job NAME to load it as another job")
    return None


def ingest_groups(paths, job=None, rank=None):
    """What `tracedb ingest PATH...` loads: (files, trace options) groups, in order.
    A capture folder (tracedb capture's, with its capture.json) is its files, each
    a group naming the folder (and, for the ncu report, the step it profiled). Any
    other directory is one job (named by --job or the directory) of its trace files,
    each of which must have a rank, and its runs are named JOB.FILE (ddp.rank0);
    files are loaded as given."""
    if rank is not None and (len(paths) > 1 or any(os.path.isdir(p) for p in paths)):
        raise ValueError("--rank gives the rank of a single trace file; give one file")
    from .capture_folder import CaptureError, folder_files, is_folder
    from .names import path_name_problem
    if job is not None and (why := path_name_problem(job, "--job")):      # the prefix of its runs' names
        raise ValueError(why)
    groups = []
    for p in paths:
        if is_folder(p):     # a capture folder: its trace, then the logs and report paired with it
            try:
                groups += [([f], {"capture": p, "iteration": it}) for f, it in folder_files(p)]
            except CaptureError as e:
                raise IngestError(p, str(e).removeprefix(f"{p}: ")) from None
        elif os.path.isdir(p):
            files = trace_files(p)
            if not files:
                raise IngestError(p, "directory holds no trace files")
            name = job or job_name(p)
            groups.append((files, {"job": name, "require_rank": True, "run_prefix": name + "."}))
        else:
            groups.append(([p], {"job": job, "rank": rank}))
    return groups


def _same_folder(a, b):
    return os.path.dirname(os.path.abspath(a)) == os.path.dirname(os.path.abspath(b))


def settle(con, directory, job):
    """After a directory's traces are loaded as job `job` (in any ingest mode):
    the ranks of one job, or several jobs' ranks in one folder? Traces of one job
    run at the same time, so runs whose time spans (first to last GPU activity or
    event) overlap are one job. When the folder's ranks repeat, its runs are
    split into jobs JOB.1, JOB.2 ... in time order, each with every rank once;
    when they cannot be told apart (one rank twice among traces whose times
    overlap, or world sizes that differ in one job), every run of the folder is
    removed and an IngestError names the directory and the two files. Returns a
    note line when jobs were split, else None."""
    from ..store.admin import remove_run
    runs = [r for r in rows(con, """
        SELECT r.run, r.rank, r.world_size, r.path,
               coalesce((SELECT min(ts_ns) FROM kernels k WHERE k.run = r.run AND k.ts_ns IS NOT NULL),
                        (SELECT min(ts_ns) FROM events e WHERE e.run = r.run)),
               coalesce((SELECT max(ts_ns + dur_ns) FROM kernels k WHERE k.run = r.run AND k.ts_ns IS NOT NULL),
                        (SELECT max(ts_ns + coalesce(dur_ns, 0)) FROM events e WHERE e.run = r.run))
        FROM runs r WHERE r.kind = 'trace' AND r.job = ? ORDER BY 5, r.rank, r.run""", [job])
            if os.path.isdir(directory) and _same_folder(r[3], os.path.join(directory, "x"))]
    ranks = [r[1] for r in runs]
    if len(set(ranks)) == len(ranks) and len({r[2] for r in runs}) <= 1:
        return None
    clusters = []             # runs whose time spans overlap, in time order
    for r in runs:
        if clusters and r[4] is not None and clusters[-1]["end"] is not None and r[4] <= clusters[-1]["end"]:
            clusters[-1]["runs"].append(r)
            clusters[-1]["end"] = max(clusters[-1]["end"], r[5])
        else:
            clusters.append({"runs": [r], "end": r[5]})

    def refuse(why):
        for r in runs:
            remove_run(con, r[0])
        raise IngestError(directory, why + "; nothing of the folder was loaded: put each job's ranks in "
                                           "a folder of its own, or load the files with --job NAME")
    for c in clusters:
        seen = {}
        for r in c["runs"]:
            if r[1] in seen:
                a, b = sorted((os.path.basename(seen[r[1]][3]), os.path.basename(r[3])))
                refuse(f"two traces claim rank {r[1]} of one job: {a} and {b} (their times overlap)")
            seen[r[1]] = r
        if len({r[2] for r in c["runs"]}) > 1:
            refuse(f"traces whose times overlap say different world sizes "
                   f"({', '.join(sorted({str(r[2]) for r in c['runs']}))})")
    names = []
    for i, c in enumerate(clusters, 1):
        name = f"{job}.{i}"
        names.append(f"{name} (ranks {', '.join(str(r[1]) for r in sorted(c['runs'], key=lambda r: r[1]))})")
        for r in c["runs"]:
            con.execute("UPDATE runs SET job = ? WHERE run = ?", [name, r[0]])
    return (f"note: {directory} holds {len(clusters)} jobs, told apart by the traces' times "
            f"(ranks of one job run together): {'; '.join(names)}")
