"""critical_path_summary's sums stored at ingest (`tracedb ingest --path-totals`), and
the report reading them back for iteration=all instead of walking every iteration's
step graph (docs/benchmarks.md: about 43 CPU s a GB to walk, 0.1 s to read).

After a command's trace runs are loaded and committed (the step graph's views read
the next chunk on a second connection, which sees only committed rows; and no other
process may open a file this one writes), store() walks each run's critical path,
every iteration, once, as critical_path_summary does with job=NULL, and keeps the
sums per (run, iteration, category, layer type) in path_iteration_totals, in a
transaction of its own: a failure there leaves the run loaded, and the report walks.

Besides the run's own rows, which an ingest writes once, the walk reads what can
change after it; each is a digest stored with the rows, and the report walks where
one differs:
- rules: layer_rules (the kernels' layer types), layer_rules_digest();
- ranks: the run's job (job_runs: its runs, their ranks and contents), whose
  collectives' last arrivals name the rank waited for;
- code: this module and analysis/critpath.py (another tracedb's walk).
The views and report SQL are the stored totals' digest (store/db.py totals_digest:
another tracedb's rows are deleted or hidden). energy_j is integrated over each
segment's time: where a power log applies (paired with a run, or power_run given),
the report walks, and a job's path (job=) is always walked.
"""
import functools
import hashlib
from importlib import resources

import pyarrow as pa

from . import critpath, critpath_workers
from ..progress import Progress, phase
from ..query import reports
from ..store.sql import rows

TABLE = "path_iteration_totals"
SUM_TYPES = {"run": pa.string(), "iteration": pa.int32(), "category": pa.string(), "layer_type": pa.string(),
             "segments": pa.int64(), "dur_ns": pa.int64(), "step_ns": pa.int64()}


@functools.cache
def code_digest():
    """A digest of the code that walks the path and sums it (this module, critpath.py)."""
    d = resources.files("tracedb.analysis")
    text = "\0".join(d.joinpath(n).read_text() for n in ("critpath.py", "path_totals.py"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# run -> the digest of its job as it is: the job's runs, ranks and contents (a run in
# no job is its own job: itself)
_RANKS = """
SELECT j.run, rows_digest((o.job, o.run, o.rank, r.content_hash)) AS digest
FROM job_runs j JOIN job_runs o ON o.job = j.job JOIN runs r ON r.run = o.run
WHERE j.run IN (SELECT unnest($runs))
GROUP BY j.run
"""


def _digests(con, runs):
    """run -> (rules, ranks, code): what the walk of each run reads now."""
    rules = rows(con, "SELECT layer_rules_digest()")[0][0]
    ranks = dict(rows(con, _RANKS, {"runs": list(runs)}))
    return {r: (rules, ranks.get(r), code_digest()) for r in runs}


def sums(con, its, progress=None):
    """{(run, iteration, category, layer_type): [segments, dur_ns, step_ns]} of the
    critical paths of its (critpath.iterations: job None), as critical_path_summary
    sums them, walked in this process."""
    return _summed(critpath.graphs(con, its), progress)


def _summed(gs, progress=None):
    out = {}
    with critpath._gc_paused():
        for k, (run, job, it, g) in enumerate(gs):
            if progress is not None and k % 10 == 0:
                progress.update(k, "iterations")
            if g is None:
                continue
            for s in critpath.critical_path(g, per_rank_waits=job is None):
                layer = g.nodes[s.node].layer if s.node is not None and s.category in critpath.GPU_CATEGORIES else None
                key = (run, it, s.category, layer)
                v = out.get(key)
                if v is None:
                    out[key] = [1, s.dur, g.dur_ns]
                else:
                    v[0] += 1
                    v[1] += s.dur
    return out


def _table_of(got):
    """sums() as an Arrow table of SUM_TYPES."""
    return pa.table({
        "run": pa.array([k[0] for k in got], pa.string()),
        "iteration": pa.array([k[1] for k in got], pa.int32()),
        "category": pa.array([k[2] for k in got], pa.string()),
        "layer_type": pa.array([k[3] for k in got], pa.string()),
        "segments": pa.array([v[0] for v in got.values()], pa.int64()),
        "dur_ns": pa.array([v[1] for v in got.values()], pa.int64()),
        "step_ns": pa.array([v[2] for v in got.values()], pa.int64())})


def _in_worker(src, chunk):
    """In a critical path worker process: the sums of a chunk of iterations."""
    return _table_of(_summed(critpath.worker_graphs(src, chunk)))


def sums_table(con, its, progress=None):
    """The sums of its as an Arrow table: the chunks in the critical path's worker
    processes where con is a file opened read-only and there are cores for them
    (critpath_workers.plan: the 1 GB trace's 300 iterations on 16 cores, 8 workers,
    took 6.6-8.7 s instead of 29.5), else walked in this process (sums)."""
    plan = critpath_workers.plan(con, its, critpath.CHUNK_ITERATIONS)
    if plan is None:
        return _table_of(sums(con, its, progress))
    src, chunks, n = plan
    if progress is not None:
        progress.update(0, f"iterations, in {n} worker processes")
    parts = critpath_workers.in_workers(functools.partial(_in_worker, src), chunks, n,
                                        lambda: [_table_of(sums(con, its, progress))])
    return pa.concat_tables(parts) if parts else _table_of({})


def walk(con, run):
    """(the sums of every iteration of the run's critical path as a table, the digests
    they hold under); the run must be committed (graphs() reads on a second connection)."""
    its = critpath.iterations(con, run, None, "all")
    progress = Progress(f"critical path sums of {run}", total=len(its))
    with phase("path totals (critical path of every iteration)"):
        table = sums_table(con, its, progress)
    progress.done(f"{len(its)} iterations, {table.num_rows} rows")
    return table, _digests(con, [run])[run]


def write(con, run, table, digests):
    """The run's sums (walk()) stored in place of its earlier ones, in a transaction of
    their own; a run without a row keeps a marker row (walked: nothing to report).
    Refused where the run, its job or the layer rules changed since the walk (another
    process between store_in_file's connections: `tracedb rm`, a rank added)."""
    rules, ranks, code = digests
    with phase("path totals (insert)"):
        con.begin()
        try:
            if not rows(con, "SELECT 1 FROM runs WHERE run = ?", [run]) or _digests(con, [run])[run] != digests:
                raise ValueError("the run, its job or the layer rules changed while its path was walked")
            con.execute(f"DELETE FROM {TABLE} WHERE run = ?", [run])
            con.register("_path_sums", table)
            try:
                con.execute(f"INSERT INTO {TABLE} SELECT *, $rules, $ranks, $code FROM _path_sums",
                            {"rules": rules, "ranks": ranks, "code": code})
            finally:
                con.unregister("_path_sums")
            if not table.num_rows:
                con.execute(f"INSERT INTO {TABLE} (run, rules, ranks, code) VALUES (?, ?, ?, ?)",
                            [run, rules, ranks, code])
            con.commit()
        except BaseException:
            con.rollback()
            raise
    return table.num_rows


def store(con, run):
    """Walk the run's critical path, every iteration, and store its sums, on one
    connection (a write connection walks in this process). Returns the rows stored."""
    return write(con, run, *walk(con, run))


def _not_stored(run, e):
    text = str(e).splitlines()[0] if str(e) else type(e).__name__
    return (f"{run}: the critical path sums were not stored ({text}); the run is loaded, and "
            "critical_path_summary walks its path")


def store_runs(con, runs, warn):
    """store() each run on con; a run whose sums could not be stored stays as it is
    loaded, and warn(line) says so (critical_path_summary then walks it)."""
    for run in runs:
        try:
            store(con, run)
        except Exception as e:       # (the run is committed: only its sums are missing)
            warn(_not_stored(run, e))


def store_in_file(open_read, open_write, runs, warn):
    """store_runs() for a database file no connection of this process holds: each run
    walked on a read-only connection (open_read()), which the critical path's worker
    processes can open too (a write connection holds the file against them), then the
    sums written on one write connection (open_write())."""
    if not runs:
        return
    walked = {}
    try:
        con = open_read()
    except Exception as e:      # (another process holds the file: the runs stay loaded)
        for run in runs:
            warn(_not_stored(run, e))
        return
    try:
        for run in runs:
            try:
                walked[run] = walk(con, run)
            except Exception as e:
                warn(_not_stored(run, e))
    finally:
        con.close()
    if not walked:
        return
    try:
        con = open_write()
    except Exception as e:
        for run in walked:
            warn(_not_stored(run, e))
        return
    try:
        for run, (table, digests) in walked.items():
            try:
                write(con, run, table, digests)
            except Exception as e:
                warn(_not_stored(run, e))
    finally:
        con.close()


def loaded_trace_runs(con, outcomes, note=None):
    """The trace runs of a command's ingest (ingest/batch.py Outcome list) whose sums to
    store, in order: those it loaded, and those whose content it skipped as a run's
    already (ingested before without --path-totals, or before a change the sums depend
    on) without current sums; then the runs of their jobs whose sums a new rank made
    stale. Not a run with a power log paired: critical_path_summary integrates the GPU
    energy over each segment of its path, so it walks whatever is stored (note(line)
    says so)."""
    out = []
    for o in outcomes:
        r = o.result
        if r is None or r.kind != "trace" or r.run in out:
            continue
        if r.status == "loaded" or (r.status == "skipped" and not _current(con, [r.run])):
            out.append(r.run)
    if out:
        mates = [m for (m,) in rows(con, f"""
            SELECT DISTINCT o.run FROM job_runs j JOIN job_runs o ON o.job = j.job
            WHERE j.run IN (SELECT unnest($runs)) AND o.run NOT IN (SELECT unnest($runs))
              AND o.run IN (SELECT run FROM {TABLE}) ORDER BY o.run""", {"runs": out})]
        out += [m for m in mates if not _current(con, [m])]
    powered = _powered(con, out) if out else set()
    for run in sorted(powered):
        if note is not None:
            note(f"{run}: a power log is paired with it, so critical_path_summary integrates the GPU energy over "
                 "each segment of its path and walks it: no critical path sums stored")
    return [r for r in out if r not in powered]


def _powered(con, runs):
    """The runs of runs with a power log paired (critical_path_summary integrates its
    energy over each segment: it walks them)."""
    return {r for (r,) in rows(con, "SELECT DISTINCT run FROM trace_power_pairs WHERE run IN (SELECT unnest($runs))",
                               {"runs": list(runs)})}


def _current(con, runs):
    """Each of runs has sums stored under the digests its walk would have now."""
    stored = {r: (a, b, c) for r, a, b, c in rows(
        con, f"SELECT DISTINCT run, rules, ranks, code FROM {TABLE} WHERE run IN (SELECT unnest($runs))",
        {"runs": list(runs)})}
    now = _digests(con, runs)
    return all(stored.get(r) == now[r] for r in runs)


# ---- the report reading them -----------------------------------------------------

def stored_sums(con, values):
    """The stored sums critical_path_summary reads for values instead of walking (an
    Arrow table of SUM_TYPES), or None where it walks: not iteration=all, a job, a power
    log that applies, or a run asked for without sums stored under the digests it
    would be walked with now."""
    if str(values.get("iteration") or "").strip().lower() != "all":
        return None
    if values.get("job") is not None or values.get("power_run") is not None:
        return None
    runs = [r for (r,) in rows(con, "SELECT run FROM runs WHERE kind = 'trace' AND ($run IS NULL OR run = $run) "
                                    "ORDER BY run", {"run": values.get("run")})]
    if not runs:
        return None
    if _powered(con, runs):
        return None
    if not _current(con, runs):
        return None
    t = con.sql(f"SELECT {', '.join(SUM_TYPES)} FROM {TABLE} "
                "WHERE run IN (SELECT unnest($runs)) AND iteration IS NOT NULL",
                params={"runs": runs}).to_arrow_table()
    return t.cast(pa.schema(SUM_TYPES))


def empty_sums():
    return critpath._table([], SUM_TYPES)


def prepared_summary(con, values):
    """critical_path_summary's relations: the stored sums (_critical_path_sums) and no
    segments, or the walk's segments (_critical_path) and no sums."""
    got = stored_sums(con, values)
    if got is None:
        tables = {"_critical_path": critpath.path_table(con, values), "_critical_path_sums": empty_sums()}
    else:
        tables = {"_critical_path": critpath._table([], critpath.PATH_TYPES), "_critical_path_sums": got}
    return critpath._registered(con, tables)


reports.register_preparer("critical_path_sums", critpath.PATH_PARAMS + ("power_run",), prepared_summary)
