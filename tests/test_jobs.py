"""Whole jobs told right (issue 49): a straggler is a rank whose lateness costs
the job step time, measured once per iteration against the job's own noise; the
reports, the rule and the waiting rank's findings agree. Real 2-GPU captures
(tests/data/dist, README there); the reference numbers come from the raw JSON."""
import functools
import math
import json
import statistics

import pytest

from conftest import DATA, dist_jobs_db, raw_trace
from independent import iterations
from independent_dist import joined_calls
from tracedb.analysis import advise
from tracedb.store import db
from tracedb.query import reports
from tracedb.cli import main

DIST = DATA / "dist"
JOBS = ["ddp", "ddp_straggler", "ddp_overlap", "fsdp", "ddp_2pg", "tp2dp2", "tp2dp2_straggler", "pp2"]
CALM = ["ddp", "ddp_overlap", "fsdp", "ddp_2pg", "tp2dp2", "pp2"]       # no rank slowed on purpose


@functools.cache
def docs(job):
    out = {}
    for p in sorted((DIST / job).glob("rank*.json.gz")):
        d = raw_trace(p)
        out[d["distributedInfo"]["rank"]] = d
    return out


@pytest.fixture(scope="module")
def jobs_db(tmp_path_factory):
    path = dist_jobs_db(tmp_path_factory)         # every job of tests/data/dist: JOBS
    con = db.connect(path)
    assert {j for (j,) in con.execute("SELECT DISTINCT job FROM runs").fetchall()} == set(JOBS)
    yield con
    con.close()


def rows(con, name, **params):
    return reports.run(con, name, {k: str(v) for k, v in params.items()}).to_pylist()


def host_period_ns(job):
    """The job's step time from the raw JSON: each rank's ProfilerStep#3 start - #2
    start (the host loop's period), the mean over ranks."""
    out = []
    for doc in docs(job).values():
        its = iterations(doc)
        out.append(its[3][0] - its[2][0])
    return statistics.mean(out)


def outside_profiler_ms(job):
    """Step time the capture script measured outside the profiler (facts_rank*.json)."""
    return statistics.mean(json.loads(p.read_text())["step_ms"] for p in (DIST / job).glob("facts_rank*.json"))


@pytest.mark.parametrize("job", CALM)
def test_no_straggler_where_no_rank_is_late_on_purpose(jobs_db, job):
    """ddp: rank 1 arrives 5-8 ms after rank 0 at every call (a phase offset the job
    pays nothing for: same 18.25 ms step as rank 0 outside the profiler); ddp_2pg the
    other way round; fsdp's last rank rotates; ddp_overlap's skew is 0.02-0.23 ms."""
    for it in ("steady", "all"):
        got = rows(jobs_db, "straggler_ranks", job=job, iteration=it)
        assert (got or job == "pp2") and not any(r["straggler"] for r in got), (job, it, got)
    assert not any(r["straggler"] for r in rows(jobs_db, "rank_summary", job=job))
    runs = [r for (r,) in jobs_db.execute("SELECT run FROM runs WHERE job = ?", [job]).fetchall()]
    for run in runs:
        fired = [f for f in advise.evaluate(jobs_db, run=run, only={"straggler_rank"})
                 if f["severity"] not in ("ok", "skipped")]
        assert not fired, fired


def test_the_straggler_costs_the_step_time_it_adds(jobs_db):
    """ddp_straggler: rank 1 sleeps 20 ms a step. The cost is the step time the job
    lost, of the order of the delay (not the 36 ms of skew summed over its calls):
    close to the step-time increase over ddp, measured from the raw JSON (host loop
    period) and outside the profiler (37.7 vs 18.25 ms)."""
    job = rows(jobs_db, "straggler_ranks", job="ddp_straggler", iteration="all")
    whole = [r for r in job if r["iteration"] is None]
    assert len(whole) == 1
    w = whole[0]
    assert w["rank"] == 1 and w["straggler"]
    in_trace = host_period_ns("ddp_straggler") - host_period_ns("ddp")
    outside = (outside_profiler_ms("ddp_straggler") - outside_profiler_ms("ddp")) * 1e6
    assert 15e6 < in_trace < 25e6 and 18e6 < outside < 21e6
    assert abs(w["cost_ns"] - in_trace) <= max(w["cost_err_ns"], 0.1 * in_trace), (w, in_trace)
    assert abs(w["cost_ns"] - outside) <= 0.15 * outside, (w, outside)
    assert w["cost_err_ns"] < 0.25 * w["cost_ns"]
    # per iteration: the lateness at the gating call is that call's skew in the raw JSON
    ref = joined_calls(docs("ddp_straggler"))
    for r in (r for r in job if r["iteration"] is not None):
        mine = [x for x in ref.values() if x["iteration"] == r["iteration"]]
        gate = max(mine, key=lambda x: x["skew_ns"])
        assert (r["rank"], r["lateness_ns"]) == (gate["last_rank"], gate["skew_ns"])
        skews = sorted(x["skew_ns"] for x in ref.values())
        assert r["typical_skew_ns"] == pytest.approx(statistics.median(skews))
        assert r["cost_ns"] == pytest.approx(gate["skew_ns"] - statistics.median(skews))
        assert r["straggler"]


def test_rank_summary_flags_the_late_rank_not_the_waiting_one(jobs_db):
    got = {r["rank"]: r for r in rows(jobs_db, "rank_summary", job="ddp_straggler")}
    assert got[1]["straggler"] and not got[0]["straggler"]
    # the rule names the same rank, with the same cost
    w = [r for r in rows(jobs_db, "straggler_ranks", job="ddp_straggler", iteration="all") if r["iteration"] is None][0]
    f1 = [f for f in advise.evaluate(jobs_db, run="ddp_straggler.rank1", only={"straggler_rank"})]
    f0 = [f for f in advise.evaluate(jobs_db, run="ddp_straggler.rank0", only={"straggler_rank"})]
    assert [f["severity"] for f in f1] == ["high"] and all(f["severity"] in ("ok", "skipped") for f in f0)
    assert f"{w['cost_ns'] / 1e6:.1f} ms" in f1[0]["evidence"]


def test_the_waiting_ranks_findings_name_the_rank_it_waited_for(jobs_db):
    """ddp_straggler rank 0's sync and exposed communication are its wait for rank 1."""
    got = {f["rule"]: f for f in advise.evaluate(jobs_db, run="ddp_straggler.rank0",
                                                 only={"sync_in_step", "low_comm_overlap"})}
    for rule in ("sync_in_step", "low_comm_overlap"):
        assert "waiting for rank 1" in got[rule]["evidence"], got[rule]
    calm = {f["rule"]: f for f in advise.evaluate(jobs_db, run="ddp.rank0", only={"sync_in_step", "low_comm_overlap"})}
    assert not any("waiting for rank" in f["evidence"] for f in calm.values())


# --- jobs in a folder ---------------------------------------------------------

def _mixed_folder(tmp_path, *pairs):
    """A folder holding the rank traces (job, rank) named a_rank0, b_rank0 ..."""
    import shutil
    d = tmp_path / "mixed"
    d.mkdir()
    for i, (job, rank) in enumerate(pairs):
        shutil.copy(DIST / job / f"rank{rank}.json.gz", d / f"{chr(97 + i)}_rank{rank}.json.gz")
    return d


@pytest.mark.parametrize("mode", [[], ["--jobs", "1"], ["--jobs", "2"]])
def test_two_jobs_in_a_folder_are_told_apart(tmp_path, capsys, mode):
    """ddp's ranks 0, 1 and ddp_2pg's ranks 0, 1 in one folder: each trace's time (the
    jobs ran 46 s apart) tells the jobs apart, in every ingest mode: two jobs of two
    ranks, each with its own collectives joined."""
    d = _mixed_folder(tmp_path, ("ddp", 0), ("ddp", 1), ("ddp_2pg", 0), ("ddp_2pg", 1))
    path = tmp_path / "m.duckdb"
    assert main(["ingest", str(d), "--db", str(path), *mode]) == 0
    out = capsys.readouterr().out
    assert "holds 2 jobs" in out
    con = db.connect(path, read_only=True)
    got = con.execute("SELECT job, list(rank ORDER BY rank), list(run ORDER BY rank) FROM runs GROUP BY job "
                      "ORDER BY job").fetchall()
    assert [(j, r) for j, r, _ in got] == [("mixed.1", [0, 1]), ("mixed.2", [0, 1])]
    assert [sorted(x[0] for x in runs) for _, _, runs in got] == [["a", "b"], ["c", "d"]] or \
        [[x.split(".")[-1][0] for x in runs] for _, _, runs in got] == [["a", "b"], ["c", "d"]]
    # the joined calls are those of each job alone
    n = dict(con.execute("SELECT job, count(*) FROM collective_calls GROUP BY job").fetchall())
    assert n == {"mixed.1": len(joined_calls(docs("ddp"))), "mixed.2": len(joined_calls(docs("ddp_2pg")))}
    con.close()


@pytest.mark.parametrize("mode", [[], ["--jobs", "1"]])
def test_two_traces_claiming_one_rank_of_one_job_are_refused(tmp_path, capsys, mode):
    """ddp's rank 0 twice (the second with one event renamed: other content, same
    times) beside its rank 1: which one is rank 0 of the job cannot be told: one
    line naming both files, exit 1, nothing loaded."""
    import gzip
    d = _mixed_folder(tmp_path, ("ddp", 0), ("ddp", 1))
    with gzip.open(DIST / "ddp" / "rank0.json.gz", "rt") as f:
        doc = json.load(f)
    doc["traceEvents"][-1]["name"] = "edited"
    with gzip.open(d / "c_rank0.json.gz", "wt") as f:
        json.dump(doc, f)
    path = tmp_path / "r.duckdb"
    assert main(["ingest", str(d), "--db", str(path), *mode]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith(f"tracedb: error: {d}: ") and "rank 0" in err[0]
    assert "a_rank0.json.gz" in err[0] and "c_rank0.json.gz" in err[0]
    assert not path.exists() or db.connect(path, read_only=True).execute("SELECT count(*) FROM runs").fetchone() == (0,)


# --- a rank's GPU in a log of several -------------------------------------------

def _power_csv(job):
    import csv
    import gzip
    out = {}
    with gzip.open(DIST / job / "nvml_power.csv.gz", "rt") as f:
        for r in csv.DictReader(f):
            out.setdefault(int(r["gpu"]), []).append((int(r["timestamp_ns"]), int(r["power_mw"]) / 1000))
    return {g: sorted(v) for g, v in out.items()}


def _integral(samples, s, e):
    """Trapezoids of the linear interpolation between samples, over [s, e] (J)."""
    def at(t):
        for (t0, p0), (t1, p1) in zip(samples, samples[1:]):
            if t0 <= t <= t1:
                return p0 + (p1 - p0) * (t - t0) / (t1 - t0)
    pts = [(s, at(s))] + [(t, p) for t, p in samples if s < t < e] + [(e, at(e))]
    return sum((t1 - t0) * (p0 + p1) / 2 for (t0, p0), (t1, p1) in zip(pts, pts[1:])) / 1e9


@pytest.mark.parametrize("job", ["ddp", "tp2dp2"])
def test_each_rank_reads_its_own_gpu_of_a_power_log_of_all(tmp_path, job):
    """ddp with its NVML log of GPU 0 and GPU 1 (tp2dp2: of GPUs 0-3): rank r's kernels ran
    on device r, so its energy (energy_summary, high_static_energy), its system metrics
    and its HTML report read GPU r. Energy checked against trapezoids of the CSV."""
    from independent_dist import per_iteration
    from tracedb.present import html_report
    path = tmp_path / "p.duckdb"
    assert main(["ingest", str(DIST / job), "--db", str(path)]) == 0
    assert main(["ingest", str(DIST / job / "nvml_power.csv.gz"), "--db", str(path)]) == 0
    con = db.connect(path)
    power = _power_csv(job)
    assert sorted(power) == sorted(docs(job))
    for rank, doc in docs(job).items():
        run = f"{job}.rank{rank}"
        devices = {e["args"]["device"] for e in doc["traceEvents"] if e.get("cat") == "kernel"}
        assert devices == {rank}
        (en,) = rows(con, "energy_summary", run=run)
        (sm,) = rows(con, "system_metrics", run=run)
        assert en["gpu"] == sm["gpu"] == rank
        it = en["iteration"]
        start = iterations(doc)[it][0]
        window = per_iteration(doc)[it]["window_ns"]
        assert en["window_ns"] == window
        mine, other = (_integral(power[g], start, start + window) for g in (rank, (rank + 1) % len(power)))
        assert en["energy_integrated_j"] == pytest.approx(mine, rel=1e-6)
        assert abs(mine - other) > 1e-3 * mine          # the two GPUs' energies differ
        (f,) = [f for f in advise.evaluate(con, run=run, only={"high_static_energy"})]
        assert f["value"] == pytest.approx(100 * en["static_j"] / en["energy_integrated_j"], abs=1e-3)
        page, _ = html_report.build(con, run)
        assert f"read GPU {rank} of power log nvml_power: the run&#x27;s own GPU (from its kernels)" in page
    con.close()


# --- process groups as users configure them -------------------------------------

def test_process_group_kinds_from_their_collectives(jobs_db):
    """DDP's gradient all-reduces are launched by autograd hooks (a thread other than
    the main one, whose tid is the pid): DP; FSDP2's all-gathers and reduce-scatters:
    FSDP; ddp_2pg's "metrics" group (a loss all-reduce and a token all-gather from the
    main thread once a step): not told. Checked against the raw record_param_comms ops."""
    got = {(r, pg): (k, src) for r, pg, k, src in jobs_db.execute(
        "SELECT run, process_group, kind, kind_source FROM process_group_kinds WHERE process_group <> 'unknown'"
    ).fetchall()}
    want = {"ddp": {"0": "DP"}, "ddp_straggler": {"0": "DP"}, "ddp_overlap": {"0": "DP"}, "fsdp": {"0": "FSDP"},
            "ddp_2pg": {"0": "DP", "1": None}}
    for job, groups in want.items():
        for rank, doc in docs(job).items():
            ops = [e for e in doc["traceEvents"] if e.get("name") == "record_param_comms" and e.get("ph") == "X"]
            for pg, kind in groups.items():
                mine = [e for e in ops if str(e["args"].get("Process Group Name")) == pg]
                from_autograd = {e["tid"] != e["pid"] for e in mine if "allreduce" in e["args"]["Collective name"]}
                if kind == "DP":
                    assert from_autograd == {True}
                got_kind, src = got[(f"{job}.rank{rank}", pg)]
                assert got_kind == kind, (job, rank, pg)
                assert src == (None if kind is None else "collectives")
    # the advice on exposed communication says which kind it is
    f = advise.evaluate(jobs_db, run="fsdp.rank0", only={"low_comm_overlap"})[0]
    assert "FSDP parameter all-gather" in f["evidence"] and "tensor-parallel" not in f["evidence"]
    f = advise.evaluate(jobs_db, run="ddp.rank0", only={"low_comm_overlap"})[0]
    assert "data-parallel gradient all-reduce" in f["evidence"]


def test_a_group_named_tp_is_tensor_parallel(tmp_path):
    """A group described as "tp" (DeviceMesh dimension names, group_desc) is TP whatever its
    collectives; the advice then says its all-reduce blocks by design."""
    import gzip
    d = tmp_path / "tpjob"
    d.mkdir()
    for rank in (0, 1):
        text = gzip.open(DIST / "ddp_2pg" / f"rank{rank}.json.gz", "rt").read()
        with gzip.open(d / f"rank{rank}.json.gz", "wt") as f:
            f.write(text.replace('"default_pg"', '"tp"'))
    path = tmp_path / "tp.duckdb"
    assert main(["ingest", str(d), "--db", str(path)]) == 0
    con = db.connect(path, read_only=True)
    got = dict(con.execute("SELECT process_group, kind FROM process_group_kinds WHERE run = 'tpjob.rank1' "
                           "AND process_group <> 'unknown'").fetchall())
    assert got == {"0": "TP", "1": None}
    f = advise.evaluate(con, run="tpjob.rank1", only={"low_comm_overlap"})[0]
    assert "tensor-parallel all-reduce (process group 0 tp), blocking by design" in f["evidence"]
    con.close()


# --- the 4-GPU TP 2 x DP 2 capture and the pipeline pair (tests/data/dist/README.md) ---

def facts(job):
    return {json.loads(p.read_text())["rank"]: json.loads(p.read_text()) for p in (DIST / job).glob("facts_rank*.json")}


def test_tp2dp2_straggler_and_its_cost(jobs_db):
    """TP 2 x DP 2 (FSDP2 over DP), rank 1 sleeping 20 ms before its backward: rank 1 is
    the straggler; its cost is the gating call's lateness beyond the job's median
    skew, both from the raw JSON. Outside the profiler the step grew 15.9 ms (30.6 ->
    46.5 ms): the host runs ahead of the GPU there and hides part of the sleep; in the
    profiled steps rank 1 arrives ~26 ms late, and the cost (24 ms) lies between."""
    ref = joined_calls(docs("tp2dp2_straggler"))
    skews = [x["skew_ns"] for x in ref.values() if x["ranks"] > 1]
    job = rows(jobs_db, "straggler_ranks", job="tp2dp2_straggler", iteration="all")
    for r in job:
        if r["iteration"] is None:
            continue
        gate = max((x for x in ref.values() if x["iteration"] == r["iteration"]), key=lambda x: x["skew_ns"])
        assert (r["rank"], r["lateness_ns"], r["straggler"]) == (gate["last_rank"], gate["skew_ns"], True)
        assert r["cost_ns"] == math.floor(gate["skew_ns"] - statistics.median(skews) + 0.5)     # SQL round: half up
    (w,) = [r for r in job if r["iteration"] is None]
    outside = (statistics.mean(f["step_ms"] for f in facts("tp2dp2_straggler").values())
               - statistics.mean(f["step_ms"] for f in facts("tp2dp2").values())) * 1e6
    assert 15e6 < outside < 17e6
    assert w["rank"] == 1 and w["straggler"] and outside < w["cost_ns"] < w["lateness_ns"] < 30e6
    # every rank's findings: the rule on rank 1 only; ranks 0 and 3 (rank 1's TP and DP peers) wait
    for rank in range(4):
        f = advise.evaluate(jobs_db, run=f"tp2dp2_straggler.rank{rank}", only={"straggler_rank"})[0]
        assert (f["severity"] == "high") == (rank == 1)


def test_tp_fsdp_and_pp_groups_told_from_their_collectives(jobs_db):
    """The capture made its groups with dist.new_group and no description: the TP pairs'
    all-reduces (forward from the main thread, backward from autograd) are TP, the DP
    pairs' FSDP2 all-gathers and reduce-scatters FSDP (the ranks of each, from the
    script's own facts); the pipeline pair's send/recv PP."""
    for job in ("tp2dp2", "tp2dp2_straggler"):
        for rank, f in facts(job).items():
            got = dict(jobs_db.execute(
                "SELECT DISTINCT c.pg_ranks, k.kind FROM process_group_kinds k JOIN collectives c "
                "ON c.run = k.run AND c.process_group = k.process_group WHERE k.run = ? AND k.kind IS NOT NULL",
                [f"{job}.rank{rank}"]).fetchall())
            assert got == {str(f["tp_ranks"]): "TP", str(f["dp_ranks"]): "FSDP"}, (job, rank, got)
    assert {k for (k,) in jobs_db.execute("SELECT DISTINCT kind FROM process_group_kinds WHERE run LIKE 'pp2.%' "
                                          "AND process_group <> 'unknown'").fetchall()} == {"PP"}
    # the exposed communication of a TP rank is told as tensor-parallel, blocking by design
    f = advise.evaluate(jobs_db, run="tp2dp2.rank0", only={"low_comm_overlap"})[0]
    assert "tensor-parallel all-reduce" in f["evidence"] or "FSDP" in f["evidence"]


def test_advise_and_report_of_a_whole_job(jobs_db, tmp_path, capsys):
    """advise --job: the straggler and its cost first (the numbers of straggler_ranks),
    the process groups with their kind, then each rule over the ranks; report --job:
    the same first, the ranks side by side with their GPU. Then the commands on a
    database of their own: exit codes, one line for an unknown job."""
    from tracedb.present import job_view
    w = [r for r in rows(jobs_db, "straggler_ranks", job="tp2dp2_straggler", iteration="all") if r["iteration"] is None][0]
    out = job_view.advise_text(jobs_db, "tp2dp2_straggler", "x.duckdb").splitlines()
    assert out[0].startswith("job tp2dp2_straggler: 4 ranks")
    assert out[1].startswith(f"straggler: rank 1 costs the job {w['cost_ns'] / 1e6:.1f} ms ± {w['cost_err_ns'] / 1e6:.1f} ms")
    assert out[2] == "process groups:" and sum(": TP (from its collectives)" in l for l in out[3:7]) == 2
    assert sum(": FSDP (from its collectives)" in l for l in out[3:7]) == 2
    assert any(l.startswith("straggler_rank: rank 1 high") for l in out)
    assert job_view.advise_text(jobs_db, "ddp", "x.duckdb").splitlines()[1].startswith("no straggler:")
    text, _ = job_view.report_html(jobs_db, "tp2dp2_straggler")
    assert text.index("Straggler and its cost") < text.index("Process groups") < text.index("Ranks side by side")
    assert f"straggler: rank 1 costs the job {w['cost_ns'] / 1e6:.1f} ms" in text
    gpus = dict(jobs_db.execute("SELECT r.rank, g.gpu FROM run_gpu g JOIN runs r USING (run) "
                                "WHERE r.job = 'tp2dp2_straggler'").fetchall())
    assert gpus == {0: 0, 1: 1, 2: 2, 3: 3}
    dbp = str(tmp_path / "one.duckdb")
    assert main(["ingest", str(DIST / "ddp_straggler"), "--db", dbp]) == 0
    capsys.readouterr()
    assert main(["advise", "--db", dbp, "--job", "ddp_straggler"]) == 0
    assert capsys.readouterr().out.splitlines()[1].startswith("straggler: rank 1 costs the job 21.0 ms")
    assert main(["advise", "--db", dbp, "--job", "nope"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no job named 'nope'" in err[0]
    assert main(["report", "--db", dbp, "--job", "ddp_straggler", "-o", str(tmp_path / "j.html")]) == 0
    assert "Straggler and its cost" in (tmp_path / "j.html").read_text()
    assert main(["export", "--perfetto", "--db", dbp, "--job", "ddp_straggler", "-o", str(tmp_path / "j.json")]) == 0
    assert main(["export", "--perfetto", "--db", dbp, "--job", "ddp_straggler", "-o", str(tmp_path / "j.txt")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "-o FILE.json" in err[0]


def test_one_perfetto_timeline_of_a_job(jobs_db, tmp_path):
    """export --perfetto --job: a process per rank, every event of every rank (the
    raw JSON's X events), and each collective call's kernels linked across its ranks by
    one flow (as many as calls joined across ranks in the raw JSON), each flow point on
    a kernel of its rank."""
    import gzip
    from tracedb.present import job_view
    out = tmp_path / "job.json.gz"
    job_view.export_perfetto(jobs_db, "tp2dp2", out)
    doc = json.load(gzip.open(out, "rt"))
    ev = doc["traceEvents"]
    procs = {e["pid"]: e["args"]["name"] for e in ev if e.get("name") == "process_name"}
    assert sorted(procs.values()) == [f"rank {r} (tp2dp2.rank{r})" for r in range(4)]
    raw_x = sum(sum(1 for e in d["traceEvents"] if e.get("ph") == "X") for d in docs("tp2dp2").values())
    assert sum(1 for e in ev if e["ph"] == "X") == raw_x
    ref = joined_calls(docs("tp2dp2"))
    starts = [e for e in ev if e["ph"] == "s"]
    assert len(starts) == sum(1 for x in ref.values() if x["ranks"] > 1)
    kernels = {(e["pid"], e["tid"], e["ts"]) for e in ev if e["ph"] == "X" and e.get("cat") == "kernel"}
    for e in ev:
        if e["ph"] in ("s", "f"):
            assert (e["pid"], e["tid"], e["ts"]) in kernels
    assert doc["tracedb_clock_offsets_ns"] == {str(r): 0 for r in range(4)}     # one host, one clock


def test_the_skew_chart_keeps_jobs_apart(jobs_db):
    """Without --param job= the skew heat map is one panel per job (the calls of ddp and
    fsdp, both process group 0 from seq 0, would otherwise share cells)."""
    from tracedb.present import charts
    spec = charts.build(jobs_db, "skew", {}).to_dict()
    assert spec["facet"]["row"]["field"] == "job"
    values = spec["data"]["values"] if "data" in spec else next(iter(spec["datasets"].values()))
    assert {"ddp", "fsdp", "tp2dp2", "ddp_straggler"} <= {v["job"] for v in values}
    one = charts.build(jobs_db, "skew", {"job": "ddp"}).to_dict()
    assert "facet" not in one
