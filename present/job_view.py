"""The view of a whole job: `tracedb advise --job JOB`, `tracedb report
--job JOB` (HTML) and `tracedb export --perfetto --job JOB`: all ranks side by
side, the straggler and what it costs first, then the process groups (their kind:
TP, DP, FSDP, PP), then each rank's findings.

The numbers come from the views and reports the rest of tracedb uses
(job_stragglers, straggler_ranks, process_group_kinds, rank_summary,
comm_overlap, advise's rules), so the job view and the per-run answers agree.
"""
import gzip
import html
import json
import statistics

from ..errors import TracedbError
from ..query import reports
from ..store.sql import rows


class JobError(TracedbError, ValueError):
    pass


def runs_of(con, job):
    """[(rank, run)] of a job, by rank; JobError when there is no such job."""
    got = rows(con, "SELECT rank, run FROM job_runs WHERE job = ? ORDER BY rank NULLS LAST, run", [job])
    if not got:
        known = [j for (j,) in rows(con, "SELECT DISTINCT job FROM job_runs WHERE rank IS NOT NULL ORDER BY 1")]
        raise JobError(f"no job named {job!r} in the database"
                       + (f" (jobs: {', '.join(known)})" if known else " (no job: tracedb ingest DIR loads one)"))
    return got


def straggler(con, job):
    """The job's straggler row (job_stragglers) or None when its ranks share no call."""
    got = reports.run(con, "straggler_ranks", {"job": job, "iteration": "all"}).to_pylist()
    return next((r for r in got if r["iteration"] is None), None), [r for r in got if r["iteration"] is not None]


def straggler_line(s):
    if s is None:
        return "stragglers: the ranks share no collective call joined across them: nothing to compare"
    if s["straggler"]:
        return (f"straggler: rank {s['rank']} costs the job {s['cost_ns'] / 1e6:.1f} ms ± "
                f"{s['cost_err_ns'] / 1e6:.1f} ms a step ({s['cost_pct']:.1f}% of the {s['step_ns'] / 1e6:.2f} ms "
                f"step): it arrives {s['lateness_ns'] / 1e6:.2f} ms after the first rank at the collective that "
                f"gates the step in {s['calls_last']} of {s['calls']} iterations, against a typical skew of "
                f"{s['typical_skew_ns'] / 1e6:.2f} ms (deviation {s['noise_ns'] / 1e6:.2f} ms)")
    return (f"no straggler: no rank is late beyond the job's noise (the most late, rank {s['rank']}, costs "
            f"{s['cost_ns'] / 1e6:.2f} ms ± {s['cost_err_ns'] / 1e6:.2f} ms, {s['cost_pct']:.2f}% of the step, late "
            f"in {s['calls_last']} of {s['calls']} iterations; typical skew {s['typical_skew_ns'] / 1e6:.2f} ms, "
            f"deviation {s['noise_ns'] / 1e6:.2f} ms)")


def process_groups(con, job):
    """Per process group of the job: its kind, description, ranks, calls and skew."""
    return [dict(zip(("process_group", "pg_desc", "kind", "kind_source", "ranks", "collectives", "calls",
                      "median_skew_ns", "max_skew_ns", "comm_ns"), r)) for r in rows(con, """
        WITH k AS (
            SELECT k.process_group, min(k.pg_desc) AS pg_desc, min(k.kind) AS kind, min(k.kind_source) AS kind_source,
                   string_agg(DISTINCT CAST(j.rank AS VARCHAR), ', ' ORDER BY CAST(j.rank AS VARCHAR)) AS ranks,
                   string_agg(DISTINCT k.collectives, '; ') AS collectives, sum(k.comm_ns) AS comm_ns
            FROM process_group_kinds k JOIN job_runs j ON j.run = k.run
            WHERE j.job = ? AND k.process_group <> 'unknown' GROUP BY k.process_group
        ), c AS (
            SELECT process_group, count(*) AS calls, median(skew_ns) AS med, max(skew_ns) AS mx
            FROM collective_calls WHERE job = ? AND ranks > 1 GROUP BY process_group
        )
        SELECT k.process_group, k.pg_desc, k.kind, k.kind_source, k.ranks, k.collectives, c.calls,
               c.med, c.mx, CAST(k.comm_ns AS BIGINT)
        FROM k LEFT JOIN c USING (process_group) ORDER BY k.comm_ns DESC, k.process_group""", [job, job])]


def findings(con, job, iteration=None, thresholds=None):
    """Every rank's findings (advise.evaluate_many per run), with the rank added."""
    from ..analysis import advise
    out = []
    for rank, run in runs_of(con, job):
        for f in advise.evaluate_many(con, run, iteration, thresholds):
            out.append(dict(f, rank=rank))
    return out


def advise_text(con, job, db, iteration=None, thresholds=None, show_ok=False):
    """`tracedb advise --job`: the straggler first, the process groups, then each
    rule with every rank's finding side by side."""
    ranks = runs_of(con, job)
    s, _ = straggler(con, job)
    lines = [f"job {job}: {len(ranks)} ranks ({', '.join(f'{r} {run}' for r, run in ranks)})",
             straggler_line(s)]
    groups = process_groups(con, job)
    if groups:
        lines.append("process groups:")
        for g in groups:
            kind = g["kind"] or "not told"
            lines.append(f"  {g['process_group']} ({g['pg_desc'] or 'no description'}): {kind}"
                         + (f" (from its {g['kind_source']})" if g["kind"] else "")
                         + f", ranks {g['ranks']}, {g['collectives']}, {g['calls'] or 0} joined calls"
                         + (f", median skew {g['median_skew_ns'] / 1e6:.2f} ms" if g["median_skew_ns"] is not None
                            else "") + f", {g['comm_ns'] / 1e6:.2f} ms of kernels")
    found = findings(con, job, iteration, thresholds)
    by_rule = {}
    for f in found:
        if f["severity"] == "skipped" or (f["severity"] == "ok" and not show_ok):
            continue
        by_rule.setdefault(f["rule"], []).append(f)
    from ..analysis.advise import ORDER
    order = sorted(by_rule, key=lambda r: (min(ORDER[f["severity"]] for f in by_rule[r]), r))
    n = sum(1 for f in found if f["severity"] not in ("ok", "skipped"))
    lines.append(f"{n} finding{'s' if n != 1 else ''} over the ranks:")
    for rule in order:
        fs = sorted(by_rule[rule], key=lambda f: (f["rank"] is None, f["rank"]))
        lines.append(f"{rule}: " + ", ".join(f"rank {f['rank']} {f['severity']}"
                                              + (f" {f['value']:g}" if f["value"] is not None else "")
                                              for f in fs) + f" ({fs[0]['unit']}, threshold {fs[0]['threshold']:g})")
        for f in fs:
            if f["severity"] != "ok":
                lines.append(f"    rank {f['rank']} ({f['run']} iteration {f['iteration']}): {f['evidence']}")
        if any(f["severity"] != "ok" for f in fs):
            lines.append(f"    try: {fs[0]['suggestion']}")
            first = next(f for f in fs if f["severity"] != "ok")
            lines.append(f"    next: tracedb query {first['next_report']} --db {db} --run {first['run']}")
    return "\n".join(lines) + "\n"


# --- HTML --------------------------------------------------------------------------

def report_html(con, job):
    """(html text, [section ids]) of the job's page: straggler and cost first, the
    process groups, ranks side by side, findings per rank, arrival skew."""
    from . import html_report as H
    ranks = runs_of(con, job)
    s, per_it = straggler(con, job)
    parts = []
    body = f"<p><b>{html.escape(straggler_line(s))}</b></p>"
    if per_it:
        body += H.table_html(per_it, ["iteration", "rank", "straggler", "gating_process_group", "gating_collective",
                                      "lateness_ns", "typical_skew_ns", "noise_ns", "cost_ns", "cost_pct", "step_ns"])
    body += ("<p class='note'>A straggler is a rank late at the collective that gates the step, beyond the job's "
             "own skew (median and deviation over all its calls), in more than half the iterations; its cost is "
             "that lateness beyond the median, once per iteration (tracedb query straggler_ranks).</p>")
    parts.append(("straggler", "Straggler and its cost", body))
    groups = process_groups(con, job)
    if groups:
        parts.append(("process_groups", "Process groups", H.table_html(groups, list(groups[0]))))
    summary = reports.run(con, "rank_summary", {"job": job}).to_pylist()
    overlap = {r["rank"]: r for r in reports.run(con, "comm_overlap", {"job": job}).to_pylist()}
    gpus = dict(rows(con, "SELECT g.run, g.gpu FROM run_gpu g JOIN job_runs j USING (run) WHERE j.job = ?", [job]))
    side = [dict(r, gpu=gpus.get(r["run"]), overlap_pct=overlap.get(r["rank"], {}).get("overlap_pct"),
                 exposed_ns=overlap.get(r["rank"], {}).get("exposed_ns")) for r in summary]
    if side:
        parts.append(("ranks", "Ranks side by side", H.table_html(side, [
            "rank", "run", "gpu", "iteration", "total_ns", "gpu_util_pct", "kernels", "overlap_pct", "exposed_ns",
            "vs_median_pct", "straggler", "straggler_cost_ns"])))
    found = [f for f in findings(con, job) if f["severity"] not in ("ok", "skipped")]
    parts.append(("findings", "Findings of every rank", H.table_html(
        found, ["rank", "severity", "rule", "value", "threshold", "unit", "evidence", "suggestion"])
        if found else "<p>none</p>"))
    try:
        import vl_convert as vlc
        from . import charts
        svg = vlc.vegalite_to_svg(charts.build(con, "skew", {"job": job}).to_dict())
        parts.append(("skew", "Arrival skew (rank x collective call)", f'<div class="chart">{svg}</div>'))
    except reports.ReportError:       # no collective joined across ranks: no chart
        pass
    nav = "".join(f'<a href="#{sid}">{html.escape(t)}</a>' for sid, t, _ in parts)
    sections = "".join(f'<section id="{sid}"><h2>{html.escape(t)}</h2>{b}</section>' for sid, t, b in parts)
    page = (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>tracedb: job {html.escape(job)}"
            f"</title><style>{H.STYLE}</style></head><body><header><h1>tracedb job report: {html.escape(job)}</h1>"
            f"<div>{len(ranks)} ranks: {html.escape(', '.join(run for _, run in ranks))}</div></header>"
            f"<nav>{nav}</nav><main>{sections}</main><script>{H.SORT_JS}</script></body></html>")
    return page, [sid for sid, _, _ in parts]


# --- Perfetto ----------------------------------------------------------------------

def _us(ns):
    return round(ns / 1000, 3)


def clock_offsets(con, job):
    """rank -> ns to add to its times so that the ranks' clocks agree: every rank of a
    collective call leaves it at the same moment (the kernels end together), so a
    rank whose kernel ends lag the others' by more than 1 ms at the median is
    another host's clock, shifted by that median; otherwise (one host, one clock:
    the traces' absolute time) 0."""
    ends = {}
    for pg, seq, rank, end in rows(con, """
            SELECT c.process_group, c.seq, j.rank, c.ts_ns + c.dur_ns FROM collectives c
            JOIN job_runs j ON j.run = c.run WHERE j.job = ? AND c.seq IS NOT NULL""", [job]):
        ends.setdefault((pg, seq), {})[rank] = end
    lag = {}
    for by_rank in ends.values():
        if len(by_rank) < 2:
            continue
        mid = statistics.median(by_rank.values())
        for rank, end in by_rank.items():
            lag.setdefault(rank, []).append(end - mid)
    out = {}
    for rank, _ in runs_of(con, job):
        m = statistics.median(lag[rank]) if lag.get(rank) else 0
        out[rank] = -int(m) if abs(m) > 1_000_000 else 0
    return out


def export_perfetto(con, job, path):
    """One timeline of every rank of the job: a process per rank (named "rank R (run)";
    its host threads and GPU streams as its threads), clocks aligned (clock_offsets), and the kernels of each
    collective call linked across ranks by flow events. The ranks' own launch
    flows are left out (their ids would collide); `export --perfetto --run` keeps
    them. Returns the number of events written."""
    ranks = runs_of(con, job)
    offsets = clock_offsets(con, job)
    base = min(t for (t,) in rows(con, "SELECT min(e.ts_ns) FROM events e JOIN job_runs j ON j.run = e.run "
                                       "WHERE j.job = ? GROUP BY e.run", [job]) if t is not None)
    tids, events = {}, []          # (run, source pid, source tid) -> tid in the rank's process

    def tid_of(run, pid, tid):
        key = (run, str(pid), str(tid))
        if key not in tids:
            tids[key] = 1 + sum(1 for k in tids if k[0] == run)
        return tids[key]
    pid_of = {run: (i + 1) for i, (_, run) in enumerate(ranks)}
    for rank, run in ranks:
        off = offsets.get(rank, 0)
        pid = pid_of[run]
        events.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": f"rank {rank} ({run})"}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": pid}})
        names = {(str(p), str(t)): (pn, tn) for p, t, pn, tn in rows(
            con, "SELECT pid, tid, process_name, thread_name FROM threads WHERE run = ?", [run])}
        for ph, cat, name, spid, stid, ts, dur, args in rows(con, """
                SELECT ph, cat, name, pid, tid, ts_ns, dur_ns, args FROM events
                WHERE run = ? AND ph IN ('X', 'i', 'I', 'C') AND ts_ns IS NOT NULL ORDER BY event_id""", [run]):
            key = (run, str(spid), str(stid))
            if key not in tids:
                pn, tn = names.get((str(spid), str(stid)), (None, None))
                events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid_of(run, spid, stid),
                               "args": {"name": (tn or f"{pn or 'pid'} {spid} thread {stid}").strip()}})
            e = {"ph": ph, "cat": cat, "name": name, "pid": pid, "tid": tid_of(run, spid, stid),
                 "ts": _us(ts + off - base)}
            if dur is not None:
                e["dur"] = _us(dur)
            if args:
                e["args"] = json.loads(args)
            events.append(e)
    flow = 1
    for pg, seq, coll, parts in rows(con, """
            SELECT c.process_group, c.seq, min(c.collective),
                   list({'rank': j.rank, 'run': j.run, 'ts': c.ts_ns, 'pid': e.pid, 'tid': e.tid}
                        ORDER BY j.rank)
            FROM collectives c JOIN job_runs j ON j.run = c.run
            JOIN events e ON e.run = c.run AND e.event_id = c.kernel_id
            WHERE j.job = ? AND c.seq IS NOT NULL
            GROUP BY c.process_group, c.seq HAVING count(*) > 1 ORDER BY 1, 2""", [job]):
        for i, p in enumerate(parts):
            ph = "s" if i == 0 else "f" if i == len(parts) - 1 else "t"
            e = {"ph": ph, "cat": "collective", "name": f"{coll} pg {pg} #{seq}", "id": flow,
                 "pid": pid_of[p["run"]], "tid": tid_of(p["run"], p["pid"], p["tid"]),
                 "ts": _us(p["ts"] + offsets.get(p["rank"], 0) - base)}
            if ph != "s":
                e["bp"] = "e"
            events.append(e)
        flow += 1
    opener = gzip.open if str(path).lower().endswith(".gz") else open
    meta = {"displayTimeUnit": "ns", "baseTimeNanoseconds": base, "tracedb_job": job,
            "tracedb_clock_offsets_ns": {str(k): v for k, v in offsets.items()}}
    try:
        with opener(path, "wt", encoding="utf-8") as f:
            f.write(json.dumps(meta)[:-1] + ', "traceEvents": [\n')
            f.write(",\n".join(json.dumps(e) for e in events))
            f.write("\n]}\n")
    except OSError as e:
        raise JobError(f"{path}: cannot write ({e.strerror})") from None
    return len(events), flow - 1
