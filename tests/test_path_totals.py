"""`tracedb ingest --path-totals`: critical_path_summary's sums per (run, iteration,
category, layer type) stored after the load (analysis/path_totals.py), which the report
reads with iteration=all instead of walking every iteration's step graph.

The stored read must give exactly the walk's rows (order too) on real traces: a
single-GPU PyTorch trace of one step, two of several steps, and both ranks of a real
DDP job (whose path waits for the other rank). Each guard is tested both ways: the
stored rows are read while what the walk reads is as it was, and the report walks
(its rows then the walk's of the changed database) where it changed (layer rules, the
job's ranks, the walk's code), where a power log applies, for a job, and where a run
asked for has no sums. A failed walk at ingest leaves the run loaded with one warning."""
import shutil
import warnings

import pytest

from conftest import DATA
from tracedb.analysis import critpath, path_totals
from tracedb.cli import main
from tracedb.query import reports
from tracedb.store import admin, db

TRACES = [DATA / "torch" / "h100_resnet50_bs64_amp.json.gz", DATA / "whatif" / "hostgap_a.json.gz",
          DATA / "whatif" / "sync_a.json.gz"]
DDP = DATA / "dist" / "ddp_straggler"
AMP = "h100_resnet50_bs64_amp"
RUNS = [AMP, "hostgap_a", "sync_a", "ddp_straggler.rank0", "ddp_straggler.rank1"]
POWER = DATA / "power" / "h100_resnet50_bs64_amp.csv"


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    p = tmp_path_factory.mktemp("pathtotals") / "p.duckdb"
    assert main(["ingest", *map(str, TRACES), str(DDP), "--db", str(p), "--path-totals"]) == 0
    return p


@pytest.fixture(autouse=True)
def one_process(monkeypatch):
    monkeypatch.setenv("TRACEDB_CRITPATH_WORKERS", "0")


@pytest.fixture
def walks(monkeypatch):
    """The number of walks critical_path_summary made (critpath.path_table calls)."""
    n = [0]
    real = critpath.path_table

    def counted(con, values):
        n[0] += 1
        return real(con, values)
    monkeypatch.setattr(critpath, "path_table", counted)
    return n


def summary(con, **params):
    return reports.run(con, "critical_path_summary", {"iteration": "all", **params}).to_pylist()


def walked(con, monkeypatch, **params):
    """The report's rows as it walks (the stored sums never read)."""
    with monkeypatch.context() as m:
        m.setattr(path_totals, "stored_sums", lambda con, values: None)
        return summary(con, **params)


def copy_of(path, tmp_path):
    c = tmp_path / "copy.duckdb"
    shutil.copyfile(path, c)
    return c


@pytest.mark.parametrize("run", RUNS + [None])
def test_stored_rows_are_the_walks(path, monkeypatch, walks, run):
    con = db.connect(path, read_only=True)
    try:
        params = {} if run is None else {"run": run}
        stored = summary(con, **params)
        assert walks[0] == 0                # read, not walked
        assert stored and stored == walked(con, monkeypatch, **params)
        assert walks[0] == 1
        if run is not None:
            assert {r["run"] for r in stored} == {run}
            assert len({r["iteration"] for r in stored}) == {AMP: 1, "hostgap_a": 6, "sync_a": 6}.get(run, 2)
        else:
            assert {r["run"] for r in stored} == set(RUNS)
    finally:
        con.close()


def test_stored_sums_match_the_segments_of_critical_path(path):
    """Independent of critical_path_summary's SQL: the segments of the critical_path
    report (the walk's own rows), counted and summed per iteration, category and layer
    type in Python, are the stored rows (rank 0 waits for the straggler rank 1: those
    segments are there)."""
    con = db.connect(path, read_only=True)
    try:
        for run in ("hostgap_a", "ddp_straggler.rank0"):
            sums = {}
            for s in reports.run(con, "critical_path", {"run": run, "iteration": "all"}).to_pylist():
                v = sums.setdefault((s["iteration"], s["category"], s["layer_type"]), [0, 0, s["step_ns"]])
                v[0] += 1
                v[1] += s["dur_ns"]
            stored = {(r[0], r[1], r[2]): [r[3], r[4], r[5]] for r in con.execute(
                "SELECT iteration, category, layer_type, segments, dur_ns, step_ns FROM path_iteration_totals "
                "WHERE run = ?", [run]).fetchall()}
            assert stored == sums and len(stored) > 5
        assert con.execute("SELECT count(*) FROM path_iteration_totals WHERE run = 'ddp_straggler.rank0' "
                           "AND category = 'waiting for another rank'").fetchone()[0] > 0
    finally:
        con.close()


def test_the_report_returns_what_is_stored(path, tmp_path, walks):
    """A stored value changed in the file is what the report returns (before
    --path-totals, the report walked and gave the measured one)."""
    c = copy_of(path, tmp_path)
    w = db.connect(c)
    w.execute("UPDATE path_iteration_totals SET dur_ns = dur_ns + 12345, segments = segments + 7 "
              "WHERE run = 'hostgap_a' AND iteration = (SELECT min(iteration) FROM path_iteration_totals "
              "WHERE run = 'hostgap_a') AND category = 'kernel'")
    w.close()
    r = db.connect(path, read_only=True)
    before = {(x["iteration"], x["category"], x["layer_type"]): x for x in summary(r, run="hostgap_a")}
    r.close()
    r = db.connect(c, read_only=True)
    try:
        after = summary(r, run="hostgap_a")
        assert walks[0] == 0
        changed = [x for x in after if x != before[(x["iteration"], x["category"], x["layer_type"])]]
        assert changed and all(x["category"] == "kernel" for x in changed)
        for x in changed:
            b = before[(x["iteration"], x["category"], x["layer_type"])]
            assert (x["dur_ns"], x["segments"]) == (b["dur_ns"] + 12345, b["segments"] + 7)
    finally:
        r.close()


def test_changed_layer_rules_walk(path, tmp_path, monkeypatch, walks):
    """A layer rule set after the ingest changes the kernels' layer types: the report
    walks (its rows: the walk's, with the new type); unchanged, it reads."""
    c = copy_of(path, tmp_path)
    w = db.connect(c)
    try:
        stored = summary(w, run="hostgap_a")
        assert walks[0] == 0
        admin.set_row(w, "layer_rules", ["priority=0", "field=name", "pattern=.", "layer_type=anything"])
        now = summary(w, run="hostgap_a")
        assert walks[0] == 1 and now == walked(w, monkeypatch, run="hostgap_a") and now != stored
        assert {x["layer_type"] for x in now if x["category"] == "kernel"} == {"anything"}
        assert summary(w, run="sync_a") == walked(w, monkeypatch, run="sync_a") and walks[0] == 4
    finally:
        w.close()


def test_a_changed_job_walks_its_ranks_only(path, tmp_path, monkeypatch, walks):
    """A rank removed from the job after the ingest: the other rank's path no longer
    waits for it, so it walks; a run of no job still reads its sums."""
    c = copy_of(path, tmp_path)
    w = db.connect(c)
    try:
        stored = summary(w, run="ddp_straggler.rank0")
        admin.remove_run(w, "ddp_straggler.rank1")
        assert w.execute("SELECT count(*) FROM path_iteration_totals WHERE run = 'ddp_straggler.rank1'").fetchone()[0] == 0
        summary(w, run="hostgap_a")
        assert walks[0] == 0
        now = summary(w, run="ddp_straggler.rank0")
        assert walks[0] == 1 and now == walked(w, monkeypatch, run="ddp_straggler.rank0")
        assert now != stored
    finally:
        w.close()


def test_another_walk_code_walks(path, monkeypatch, walks):
    con = db.connect(path, read_only=True)
    try:
        summary(con, run="sync_a")
        assert walks[0] == 0
        monkeypatch.setattr(path_totals, "code_digest", lambda: "another")
        assert summary(con, run="sync_a") == walked(con, monkeypatch, run="sync_a") and walks[0] == 2
    finally:
        con.close()


def test_a_power_log_walks(path, tmp_path, monkeypatch, walks):
    """energy_j integrates each segment's time: with a power log paired with the run the
    report walks and gives energy; another run without one reads its sums."""
    c = copy_of(path, tmp_path)
    assert main(["ingest", str(POWER), "--db", str(c), "--pair-with", AMP]) == 0
    r = db.connect(c, read_only=True)
    try:
        assert summary(r, run="hostgap_a") == walked(r, monkeypatch, run="hostgap_a")
        assert walks[0] == 1          # (the walk above)
        got = summary(r, run=AMP)
        assert walks[0] == 2 and got == walked(r, monkeypatch, run=AMP)
        assert any(x["energy_j"] is not None for x in got)
    finally:
        r.close()
    r = db.connect(path, read_only=True)
    try:                           # power_run given (none such here: still the walk)
        n = walks[0]
        summary(r, run=AMP, power_run=AMP)
        assert walks[0] == n + 1
    finally:
        r.close()


def test_a_job_and_one_iteration_walk(path, walks):
    con = db.connect(path, read_only=True)
    try:
        assert {x["job"] for x in summary(con, job="ddp_straggler")} == {"ddp_straggler"}
        assert walks[0] == 1
        reports.run(con, "critical_path_summary", {"run": "hostgap_a", "iteration": "3"})
        assert walks[0] == 2
        summary(con, run="hostgap_a")
        assert walks[0] == 2
    finally:
        con.close()


def test_a_run_without_sums_walks_every_run_asked(path, tmp_path, monkeypatch, walks):
    c = copy_of(path, tmp_path)
    assert main(["ingest", str(DATA / "whatif" / "hostgap_b.json.gz"), "--db", str(c)]) == 0
    r = db.connect(c, read_only=True)
    try:
        summary(r, run="hostgap_a")
        assert walks[0] == 0
        every = summary(r)
        assert walks[0] == 1 and "hostgap_b" in {x["run"] for x in every}
        assert every == walked(r, monkeypatch)
    finally:
        r.close()


def test_a_failed_walk_leaves_the_run_loaded(tmp_path, monkeypatch, capsys):
    def fail(con, its, progress=None):
        raise RuntimeError("no graph today")
    monkeypatch.setattr(path_totals, "sums", fail)
    p = tmp_path / "f.duckdb"
    assert main(["ingest", str(TRACES[1]), "--db", str(p), "--path-totals"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("tracedb: warning: hostgap_a: the critical path sums were not "
                                               "stored (no graph today)")
    con = db.connect(p, read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM runs WHERE run = 'hostgap_a'").fetchone()[0] == 1
        assert con.execute("SELECT count(*) FROM path_iteration_totals").fetchone()[0] == 0
        assert len(summary(con, run="hostgap_a")) > 5          # walked
    finally:
        con.close()


def test_lake_refuses_path_totals(tmp_path, capsys):
    assert main(["ingest", str(TRACES[1]), "--lake", str(tmp_path / "lake"), "--path-totals"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--path-totals is refused with --lake" in err[0] and "--db" in err[0]
    assert not (tmp_path / "lake").exists()


def test_api_keyword_and_a_run_without_iterations(tmp_path, monkeypatch):
    """TraceDB.ingest(path_totals=True) stores them as the CLI does; a trace without
    step markers keeps a marker row (walked: nothing to report) and reads no row."""
    import tracedb
    t = tracedb.connect(tmp_path / "a.duckdb")
    t.ingest(DATA / "whatif" / "hostgap_b.json.gz", path_totals=True)
    t.ingest(DATA / "cupti" / "a100_cupti_range_profiler.json.gz", path_totals=True)
    con = db.connect(tmp_path / "a.duckdb", read_only=True)
    try:
        marker = con.execute("SELECT iteration, category FROM path_iteration_totals "
                             "WHERE run = 'a100_cupti_range_profiler'").fetchall()
        assert marker == [(None, None)]
        assert path_totals.stored_sums(con, {"iteration": "all"}) is not None
        assert summary(con) == walked(con, monkeypatch) and {x["run"] for x in summary(con)} == {"hostgap_b"}
    finally:
        con.close()


def test_another_tracedbs_sums_are_not_read(path, tmp_path, monkeypatch, walks):
    """Sums stored by a tracedb whose views, load scripts or reports differ (schema_info
    'totals' another digest): a read-only open hides them and the report walks; a write
    open deletes them (catalog.TOTALS_TABLES)."""
    _walked_read_only_then_empty(copy_of(path, tmp_path), monkeypatch, walks, "hostgap_a",
                                 "UPDATE schema_info SET value = 'older' WHERE key = 'totals'")


def test_a_file_of_schema_version_7_walks_read_only(path, tmp_path, monkeypatch, walks):
    """A file stamped 7 has no path_iteration_totals: a read-only open stands in an
    empty one (readold.py, as for earlier totals tables), and the report walks; a write
    open adds the table."""
    _walked_read_only_then_empty(copy_of(path, tmp_path), monkeypatch, walks, "sync_a",
                                 "DROP TABLE path_iteration_totals",
                                 "UPDATE schema_info SET value = '7' WHERE key = 'version'")


def _walked_read_only_then_empty(c, monkeypatch, walks, run, *changes):
    """The file c changed by the statements: read-only, the report walks run (the same
    rows as the walk); then a write open leaves path_iteration_totals empty."""
    w = db.connect(c)
    for sql in changes:
        w.execute(sql)
    w.close()
    r = db.connect(c, read_only=True)
    try:
        assert summary(r, run=run) == walked(r, monkeypatch, run=run) and walks[0] == 2
    finally:
        r.close()
    w = db.connect(c)
    try:
        assert w.execute("SELECT count(*) FROM path_iteration_totals").fetchone()[0] == 0
    finally:
        w.close()


def test_an_nsight_systems_export(tmp_path, monkeypatch, walks):
    """An Nsight Systems export (its iterations from an op name, --iterations-from) stores
    its sums as a Kineto trace does: 67 iterations, read back as the walk gives them."""
    p = tmp_path / "n.duckdb"
    assert main(["ingest", str(DATA / "nsys" / "mfu_2gpu_before.sqlite.gz"), "--iterations-from", "FlashAttnFunc",
                 "--db", str(p), "--path-totals"]) == 0
    r = db.connect(p, read_only=True)
    try:
        got = summary(r)
        assert walks[0] == 0 and len({x["iteration"] for x in got}) == 67
        assert got == walked(r, monkeypatch)
    finally:
        r.close()


def test_a_trace_ingested_again_with_the_flag_gets_its_sums(tmp_path, monkeypatch, walks, capsys):
    """A trace loaded without --path-totals, ingested again with it: its content is
    skipped (already a run) and its sums are stored; a third time, with sums current,
    nothing is walked."""
    p = tmp_path / "again.duckdb"
    assert main(["ingest", str(TRACES[1]), "--db", str(p)]) == 0
    assert main(["ingest", str(TRACES[1]), "--db", str(p), "--path-totals"]) == 0
    assert "skipped" in capsys.readouterr().out
    r = db.connect(p, read_only=True)
    try:
        got = summary(r)
        assert walks[0] == 0 and got == walked(r, monkeypatch)
    finally:
        r.close()
    n = [0]
    real = path_totals.sums

    def counted(con, its, progress=None):
        n[0] += 1
        return real(con, its, progress)
    monkeypatch.setattr(path_totals, "sums", counted)
    assert main(["ingest", str(TRACES[1]), "--db", str(p), "--path-totals"]) == 0
    assert n[0] == 0


def test_sums_walked_in_worker_processes(path, tmp_path, monkeypatch):
    """With cores for them (forced here: 2 workers, chunks of 1 iteration), the ingest
    closes its write connection, walks on a read-only one whose chunks the critical
    path's worker processes walk, and stores the same rows as the one process."""
    from tracedb.analysis import critpath_workers
    monkeypatch.setenv("TRACEDB_CRITPATH_WORKERS", "2")
    monkeypatch.setattr(critpath_workers, "MIN_ITERATIONS", 0)
    monkeypatch.setattr(critpath, "CHUNK_ITERATIONS", 1)
    given = []
    real = critpath_workers.each_in_workers
    monkeypatch.setattr(critpath_workers, "each_in_workers",
                        lambda fn, items, jobs, **kw: given.append(list(items)) or real(fn, items, jobs, **kw))
    p = tmp_path / "w.duckdb"
    with warnings.catch_warnings():     # a worker that died (the sums then walked here) fails the test
        warnings.filterwarnings("error", message="a worker process of the critical path ended abruptly")
        assert main(["ingest", str(TRACES[1]), str(TRACES[2]), "--db", str(p), "--path-totals"]) == 0
    assert len(given) == 2 and all(len(g) >= 2 for g in given)       # each run in chunks, in workers
    cols = "run, iteration, category, layer_type, segments, dur_ns, step_ns, rules, ranks, code"
    q = f"SELECT {cols} FROM path_iteration_totals WHERE run IN ('hostgap_a', 'sync_a') ORDER BY ALL"
    w, one = db.connect(p, read_only=True), db.connect(path, read_only=True)
    try:
        got, want = w.execute(q).fetchall(), one.execute(q).fetchall()
        assert len(got) > 20 and got == want
    finally:
        w.close()
        one.close()


def test_another_process_holding_the_file_leaves_the_runs_loaded(tmp_path, monkeypatch, capsys):
    """A process that opens the file between the ingest's connections (a report read
    while the path is walked) holds it against the write that stores the sums: past
    the wait (here none) the ingest still exits 0, its run loaded, with one warning that
    names the run (before, the lock failed the command after its run had loaded)."""
    import subprocess
    import sys
    from tracedb import cli
    monkeypatch.setattr(cli, "_REOPEN_WAIT_S", 0.0)
    p = tmp_path / "held.duckdb"
    holder = []
    real = path_totals.walk

    def walk_then_held(con, run):
        out = real(con, run)
        holder.append(subprocess.Popen(
            [sys.executable, "-c", f"import duckdb, sys; c = duckdb.connect({str(p)!r}, read_only=True); "
                                   "print('held', flush=True); sys.stdin.read()"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
        assert holder[-1].stdout.readline().strip() == "held"
        return out
    monkeypatch.setattr(path_totals, "walk", walk_then_held)
    try:
        assert main(["ingest", str(TRACES[1]), "--db", str(p), "--path-totals"]) == 0
    finally:
        for h in holder:
            h.communicate("")
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("tracedb: warning:")]
    assert len(holder) == 1 and len(err) == 1
    assert err[0].startswith("tracedb: warning: hostgap_a: the critical path sums were not stored (")
    con = db.connect(p, read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM runs WHERE run = 'hostgap_a'").fetchone()[0] == 1
        assert con.execute("SELECT count(*) FROM path_iteration_totals").fetchone()[0] == 0
    finally:
        con.close()


def test_a_run_with_a_power_log_gets_no_sums(tmp_path, monkeypatch, capsys):
    """A power log paired with the trace: the report integrates the energy over each
    segment, so it walks whatever is stored; the ingest says so and walks nothing."""
    p = tmp_path / "pw.duckdb"
    assert main(["ingest", str(TRACES[0]), "--db", str(p)]) == 0
    assert main(["ingest", str(POWER), "--db", str(p), "--pair-with", AMP]) == 0
    n = [0]
    real = path_totals.sums
    monkeypatch.setattr(path_totals, "sums", lambda *a, **k: n.__setitem__(0, n[0] + 1) or real(*a, **k))
    capsys.readouterr()
    assert main(["ingest", str(TRACES[0]), "--db", str(p), "--path-totals"]) == 0
    out = capsys.readouterr().out
    assert f"note: {AMP}: a power log is paired with it" in out and n[0] == 0
    con = db.connect(p, read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM path_iteration_totals").fetchone()[0] == 0
    finally:
        con.close()


def test_a_rank_added_walks_the_job_again(tmp_path, monkeypatch):
    """Rank 0 ingested with --path-totals alone, then rank 1: rank 0's path now waits
    for rank 1 (its stored sums went stale), so the second ingest walks and stores both,
    and the report reads rank 0's sums again, equal to its walk."""
    p = tmp_path / "job.duckdb"
    for rank in (0, 1):
        assert main(["ingest", str(DDP / f"rank{rank}.json.gz"), "--db", str(p), "--job", "ddp", "--rank",
                     str(rank), "--path-totals"]) == 0
    con = db.connect(p, read_only=True)
    try:
        runs = [r for (r,) in con.execute("SELECT run FROM runs WHERE job = 'ddp' ORDER BY rank").fetchall()]
        assert len(runs) == 2 and path_totals._current(con, runs)
        assert path_totals.stored_sums(con, {"iteration": "all", "run": runs[0]}) is not None
        assert summary(con, run=runs[0]) == walked(con, monkeypatch, run=runs[0])
    finally:
        con.close()
