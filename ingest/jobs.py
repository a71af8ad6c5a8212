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
    if why := clash(con, job, have, fields.get("world_size")):
        raise IngestError(path, why)
    fields["job"] = job
    return fields


def clash(con, job, rank, world):
    """Why a trace of rank `rank` (world size `world`) cannot join job `job` in the
    database behind con (the rank is taken; another world size), or None. Also asked
    when a parallel ingest copies a worker's run in (two files of one folder both
    claiming rank 0 were both loaded)."""
    for other, other_rank, other_world in rows(con, "SELECT run, rank, world_size FROM runs "
                                                    "WHERE kind = 'trace' AND job = ?", [job]):
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
