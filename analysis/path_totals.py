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

from . import critpath
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
    sums them."""
    out = {}
    with critpath._gc_paused():
        for k, (run, job, it, g) in enumerate(critpath.graphs(con, its)):
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


def store(con, run):
    """Walk the run's critical path, every iteration, and store its sums (replacing the
    run's), in a transaction of its own; the run must be committed (graphs() reads on a
    second connection). Returns the rows stored."""
    its = critpath.iterations(con, run, None, "all")
    progress = Progress(f"critical path sums of {run}", total=len(its))
    with phase("path totals (critical path of every iteration)"):
        got = sums(con, its, progress)
    rules, ranks, code = _digests(con, [run])[run]
    table = pa.table({
        "run": pa.array([k[0] for k in got], pa.string()),
        "iteration": pa.array([k[1] for k in got], pa.int32()),
        "category": pa.array([k[2] for k in got], pa.string()),
        "layer_type": pa.array([k[3] for k in got], pa.string()),
        "segments": pa.array([v[0] for v in got.values()], pa.int64()),
        "dur_ns": pa.array([v[1] for v in got.values()], pa.int64()),
        "step_ns": pa.array([v[2] for v in got.values()], pa.int64())})
    with phase("path totals (insert)"):
        con.begin()
        try:
            con.execute(f"DELETE FROM {TABLE} WHERE run = ?", [run])
            con.register("_path_sums", table)
            try:
                con.execute(f"INSERT INTO {TABLE} SELECT *, $rules, $ranks, $code FROM _path_sums",
                            {"rules": rules, "ranks": ranks, "code": code})
            finally:
                con.unregister("_path_sums")
            if not got:            # the run's marker: walked, nothing to report
                con.execute(f"INSERT INTO {TABLE} (run, rules, ranks, code) VALUES (?, ?, ?, ?)",
                            [run, rules, ranks, code])
            con.commit()
        except BaseException:
            con.rollback()
            raise
    progress.done(f"{len(its)} iterations, {len(got)} rows")
    return len(got)


def store_runs(con, runs, warn):
    """store() each run; a run whose sums could not be stored stays as it is loaded,
    and warn(line) says so (critical_path_summary then walks it)."""
    for run in runs:
        try:
            store(con, run)
        except Exception as e:       # (the run is committed: only its sums are missing)
            text = str(e).splitlines()[0] if str(e) else type(e).__name__
            warn(f"{run}: the critical path sums were not stored ({text}); the run is loaded, and "
                 "critical_path_summary walks its path")


def loaded_trace_runs(con, outcomes):
    """The trace runs of a command's ingest (ingest/batch.py Outcome list), in order: those
    it loaded, and those whose content it skipped as a run's already (ingested before
    without --path-totals, or before a change the sums depend on) without current sums."""
    out = []
    for o in outcomes:
        r = o.result
        if r is None or r.kind != "trace" or r.run in out:
            continue
        if r.status == "loaded" or (r.status == "skipped" and not _current(con, [r.run])):
            out.append(r.run)
    return out


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
    if rows(con, "SELECT 1 FROM trace_power_pairs WHERE run IN (SELECT unnest($runs)) LIMIT 1", {"runs": runs}):
        return None
    if not _current(con, runs):
        return None
    t = con.sql(f"SELECT {', '.join(SUM_TYPES)} FROM {TABLE} "
                "WHERE run IN (SELECT unnest($runs)) AND iteration IS NOT NULL",
                params={"runs": runs}).to_arrow_table()
    return t.cast(pa.schema(SUM_TYPES))


def empty_sums():
    return pa.table({c: pa.array([], t) for c, t in SUM_TYPES.items()})


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
