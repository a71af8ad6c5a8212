"""iteration=all of the critical path reports reads the step graph a chunk of
iterations at a time (analysis/critpath.py graphs(): the views once per chunk, in
the chunk's window, the next chunk read on a second connection while this one's
graphs are built). Its rows must be exactly the rows each iteration asked for alone
gives (its own window, read on this connection): on real single-rank traces and on
real 2- and 4-rank jobs, for critical_path, critical_path_summary and what_if, with
chunks smaller than the runs (so chunk boundaries fall inside them) and with the
reading done here when no second connection can be made.

In worker processes (analysis/critpath_workers.py, forced on with 2 workers whatever
the machine's cores): the rows of iteration=all, of a run, a job and every run, are
those of the one process, in its order; a write connection or an in-memory database
stays in the one process."""
import warnings

import duckdb
import pytest

from conftest import DATA
from tracedb.analysis import critpath, critpath_workers
from tracedb.cli import main
from tracedb.query import reports
from tracedb.store import db

WHATIF = DATA / "whatif"
DIST = DATA / "dist"


@pytest.fixture(scope="module")
def con(tmp_path_factory):
    path = tmp_path_factory.mktemp("cpall") / "cpall.duckdb"
    assert main(["ingest", str(WHATIF / "hostgap_a.json.gz"), str(WHATIF / "sync_a.json.gz"),
                 str(DIST / "ddp_straggler"), str(DIST / "tp2dp2"), "--db", str(path)]) == 0
    c = db.connect(path, read_only=True)        # (as `tracedb query` opens it: the workers can too)
    yield c
    c.close()


@pytest.fixture
def chunked(monkeypatch):
    """Chunks of 2 iterations."""
    monkeypatch.setattr(critpath, "CHUNK_ITERATIONS", 2)


def _by_iteration(rows):
    out = {}
    for r in rows:
        out.setdefault(r["iteration"], []).append(r)
    return out


TARGETS = [{"run": "hostgap_a"}, {"run": "ddp_straggler.rank0"}, {"job": "ddp_straggler"}, {"job": "tp2dp2"}]


def _iterations(con, target):
    its = critpath.iterations(con, target.get("run"), target.get("job"), "all")
    return [it for _, _, it in its]


@pytest.mark.parametrize("target,report", [
    (TARGETS[0], "critical_path"), (TARGETS[0], "critical_path_summary"), (TARGETS[1], "critical_path"),
    (TARGETS[2], "critical_path"), (TARGETS[2], "critical_path_summary"), (TARGETS[3], "critical_path"),
], ids=lambda x: next(iter(x.values())) if isinstance(x, dict) else x)
def test_all_equals_each_iteration(con, chunked, target, report):
    _same_as_alone(con, target, report)


def test_read_here_without_a_second_connection(con, chunked, monkeypatch):
    """Where the cursor's settings cannot be set (a sandboxed connection), the chunks
    are read on con itself: the same rows."""
    def refuse(cur):
        raise RuntimeError("settings locked")
    monkeypatch.setattr(critpath.tuning, "asof_by_sort", refuse)
    _same_as_alone(con, {"run": "sync_a"}, "critical_path")


def _same_as_alone(con, target, report):
    its = _iterations(con, target)
    every = _by_iteration(reports.run(con, report, {**target, "iteration": "all"}).to_pylist())
    assert sorted(every) == its
    if target.get("run") in ("hostgap_a", "sync_a"):
        assert len(its) == 6         # three chunks: boundaries inside the run
    for it in its:
        alone = reports.run(con, report, {**target, "iteration": str(it)}).to_pylist()
        assert alone, (target, it)
        assert every[it] == alone, (target, it)


@pytest.mark.parametrize("target,change", [
    ({"run": "sync_a"}, {"remove_syncs": "true"}),
    ({"run": "hostgap_a"}, {"zero_launch_overhead": "true"}),
    ({"job": "ddp_straggler"}, {"remove_rank_lateness": "1"}),
], ids=["sync_a", "hostgap_a", "ddp_straggler"])
def test_what_if_all_equals_each_iteration(con, chunked, target, change):
    t, p = critpath.what_if(con, {**target, **change, "iteration": "all", "path": "true"})
    rows, paths = _by_iteration(t.to_pylist()), _by_iteration(p.to_pylist())
    its = _iterations(con, target)
    assert sorted(rows) == its
    saved = 0
    for it in its:
        t1, p1 = critpath.what_if(con, {**target, **change, "iteration": str(it), "path": "true"})
        assert rows[it] == t1.to_pylist()
        assert paths[it] == p1.to_pylist()
        saved += rows[it][0]["saving_ns"]
    assert saved > 0             # the change does something in these runs: a comparison of substance


# ---- in worker processes ---------------------------------------------------------

@pytest.fixture
def workers(monkeypatch, chunked):
    """2 workers however many cores, for as few iterations as the fixtures have, in
    chunks of 1 iteration (a job's 2 iterations: 2 chunks); the chunks given to the
    workers are recorded."""
    monkeypatch.setattr(critpath_workers, "MIN_ITERATIONS", 0)
    monkeypatch.setattr(critpath, "CHUNK_ITERATIONS", 1)
    given = []
    real = critpath_workers.each_in_workers

    def spy(fn, items, jobs, **kw):
        given.append((jobs, list(items)))
        return real(fn, items, jobs, **kw)
    monkeypatch.setattr(critpath_workers, "each_in_workers", spy)
    with warnings.catch_warnings():     # a worker that died (the rows then made here) fails the test
        warnings.filterwarnings("error", message="a worker process of the critical path ended abruptly")
        yield given


def _serial_and_parallel(monkeypatch, given, fn):
    """fn() in this process (TRACEDB_CRITPATH_WORKERS=0), then in 2 workers, which
    must have been given 2 chunks or more, each of other iterations (so that a chunk
    dropped, repeated or out of place changes the rows)."""
    monkeypatch.setenv("TRACEDB_CRITPATH_WORKERS", "0")
    serial = fn()
    assert not given
    monkeypatch.setenv("TRACEDB_CRITPATH_WORKERS", "2")
    parallel = fn()
    assert len(given) == 1 and given[0][0] == 2 and len(given[0][1]) >= 2, given
    chunks = [(run, job, its) for run, job, its in given[0][1]]
    assert len(set(chunks)) == len(chunks)
    given.clear()
    return serial, parallel


@pytest.mark.parametrize("target,reports_too", [
    ({"run": "hostgap_a"}, ("critical_path", "critical_path_summary")), ({"job": "ddp_straggler"},
     ("critical_path_summary",)), ({"job": "tp2dp2"}, ()), ({}, ()),
], ids=["run", "job2", "job4", "every_run"])
def test_workers_give_the_serial_rows(con, workers, monkeypatch, target, reports_too):
    """The critical_path table as prepared (in its order: the reports' ORDER BY would
    hide a chunk out of place), for a run, the 2- and 4-rank jobs and every run (the
    chunks of 8 runs); for a run and a job also the reports' rows (each pool of
    workers costs a second or two to start: not every report everywhere)."""
    values = {**target, "iteration": "all"}
    if not target:            # (chunks of 3: a run's 6 iterations in 2, each rank's 2 in 1)
        monkeypatch.setattr(critpath, "CHUNK_ITERATIONS", 3)
    serial, parallel = _serial_and_parallel(monkeypatch, workers, lambda: critpath.path_table(con, values))
    assert serial.num_rows > 0
    # each iteration's segments together, in the iterations' order
    got = [(r["job"] or r["run"], r["iteration"]) for r in parallel.select(["run", "job", "iteration"]).to_pylist()]
    assert list(dict.fromkeys(got)) == [(job or run, it) for run, job, it in critpath.iterations(
        con, target.get("run"), target.get("job"), "all")]
    assert parallel.schema == serial.schema
    assert parallel.to_pylist() == serial.to_pylist()
    for report in reports_too:
        serial, parallel = _serial_and_parallel(monkeypatch, workers, lambda: reports.run(con, report, values))
        assert parallel.to_pylist() == serial.to_pylist(), report


@pytest.mark.parametrize("target,change", [
    ({"run": "sync_a"}, {"remove_syncs": "true"}),
    ({"job": "ddp_straggler"}, {"remove_rank_lateness": "1"}),
], ids=["sync_a", "ddp_straggler"])
def test_workers_give_the_serial_what_if(con, workers, monkeypatch, target, change):
    """what_if's two tables as prepared (a row an iteration, the new paths), and for a
    run the report's rows."""
    values = {**target, **change, "iteration": "all", "path": "true"}
    (t0, p0), (t1, p1) = _serial_and_parallel(monkeypatch, workers, lambda: critpath.what_if(con, values))
    assert t0.num_rows == len(_iterations(con, target)) and sum(t0.column("saving_ns").to_pylist()) > 0
    assert t1.to_pylist() == t0.to_pylist()
    assert p0.num_rows > 0 and p1.to_pylist() == p0.to_pylist()
    if "job" in target:
        return
    serial, parallel = _serial_and_parallel(monkeypatch, workers,
                                            lambda: reports.run(con, "what_if", {**values, "path": "true"}))
    assert parallel.to_pylist() == serial.to_pylist()


def test_a_write_connection_stays_in_this_process(tmp_path, workers, monkeypatch):
    """A write connection holds DuckDB's lock on the file (a worker could not open it),
    and an in-memory database is this process's alone: the one process, the same rows
    as each iteration alone."""
    monkeypatch.setenv("TRACEDB_CRITPATH_WORKERS", "2")
    path = tmp_path / "w.duckdb"
    assert main(["ingest", str(WHATIF / "sync_a.json.gz"), "--db", str(path)]) == 0
    w = db.connect(path)
    try:
        assert critpath_workers.source(w) is None
        _same_as_alone(w, {"run": "sync_a"}, "critical_path")
        assert not workers
    finally:
        w.close()
    mem = duckdb.connect()
    assert critpath_workers.source(mem) is None
    mem.close()


def test_workers_of_a_sandboxed_connection(tmp_path, workers, monkeypatch):
    """`tracedb query`'s connection (read-only, external access off, its configuration
    locked): the workers open the database sandboxed too, and give the same rows."""
    from tracedb.store import sandbox
    path = tmp_path / "s.duckdb"
    assert main(["ingest", str(WHATIF / "sync_a.json.gz"), "--db", str(path)]) == 0
    c = sandbox.lock(db.connect(path, read_only=True))
    try:
        assert critpath_workers.source(c)[:2] == (str(path), True)
        values = {"run": "sync_a", "iteration": "all"}
        serial, parallel = _serial_and_parallel(monkeypatch, workers, lambda: critpath.path_table(c, values))
        assert serial.num_rows > 0 and parallel.to_pylist() == serial.to_pylist()
    finally:
        c.close()


def test_the_default_number_of_workers(monkeypatch):
    """None below 4 usable cores (the 2-core machine keeps the one process), one a core
    but the parent's up to 8, one for each 2 GiB of memory; the variable overrides it."""
    monkeypatch.delenv("TRACEDB_CRITPATH_WORKERS", raising=False)
    gib = 1 << 30
    for cores, memory, want in ((1, 64, 0), (2, 64, 0), (3, 64, 0), (4, 64, 3), (8, 64, 7), (16, 64, 8),
                                (64, 64, 8), (16, 8, 4), (16, 5, 2), (16, 3, 1), (2, 1, 0)):
        monkeypatch.setattr(critpath_workers.os, "sched_getaffinity", lambda _, n=cores: set(range(n)))
        monkeypatch.setattr(critpath_workers, "_memory_bytes", lambda m=memory: m * gib)
        assert critpath_workers.workers() == want, (cores, memory)
    monkeypatch.setenv("TRACEDB_CRITPATH_WORKERS", "0")
    assert critpath_workers.workers() == 0
    monkeypatch.setenv("TRACEDB_CRITPATH_WORKERS", "5")
    assert critpath_workers.workers() == 5


def test_no_workers_where_they_could_not_start(con, workers, monkeypatch):
    """A script read from stdin (a __main__ file that does not exist, which a spawned
    worker would load again and fail on): the one process, the same rows."""
    import sys
    monkeypatch.setenv("TRACEDB_CRITPATH_WORKERS", "2")
    its = critpath.iterations(con, "hostgap_a", None, "all")
    assert critpath_workers.plan(con, its, 1) is not None
    monkeypatch.setattr(sys.modules["__main__"], "__file__", "/nonexistent/<stdin>", raising=False)
    assert critpath_workers.plan(con, its, 1) is None
    _same_as_alone(con, {"run": "hostgap_a"}, "critical_path")
    assert not workers


def _dies(chunk):
    """A worker that ends abruptly, as one the kernel killed for its memory."""
    import os
    os._exit(9)


@pytest.mark.parametrize("report", ["critical_path", "what_if"])
def test_a_worker_that_dies_leaves_the_rows_to_this_process(con, workers, monkeypatch, report):
    """A worker process that ends abruptly breaks the pool: the report's rows are
    made again in this process, with a warning, the same as the one process's (before,
    the report failed with BrokenProcessPool)."""
    values = {"run": "hostgap_a", "iteration": "all"}
    make = (lambda: critpath.path_table(con, values)) if report == "critical_path" else \
        (lambda: critpath.what_if(con, {**values, "zero_launch_overhead": "true"})[0])
    monkeypatch.setenv("TRACEDB_CRITPATH_WORKERS", "0")
    alone = make()
    monkeypatch.setenv("TRACEDB_CRITPATH_WORKERS", "2")
    real = critpath_workers.in_workers
    monkeypatch.setattr(critpath_workers, "in_workers",
                        lambda fn, chunks, n, here: real(_dies, chunks, n, here))
    with pytest.warns(UserWarning, match="ended abruptly"):
        got = make()
    assert len(workers) == 1 and len(workers[0][1]) >= 2       # (the pool was started, and broke)
    assert alone.num_rows > 0 and got.to_pylist() == alone.to_pylist()


def test_what_if_makes_the_new_path_only_when_asked(con, workers, monkeypatch):
    """what_if without path=true makes no new critical path (its rows are shown only
    with path=true; making them took 40% of the replay's time): the step rows are those
    made with the path, in the one process and in workers, and the report's rows are
    those of path=true without its category rows."""
    values = {"run": "hostgap_a", "iteration": "all", "zero_launch_overhead": "true"}
    monkeypatch.setenv("TRACEDB_CRITPATH_WORKERS", "0")
    steps, none = critpath.what_if(con, values)
    with_steps, path = critpath.what_if(con, {**values, "path": "true"})
    assert none.num_rows == 0 and path.num_rows > 0
    assert steps.num_rows > 1 and steps.to_pylist() == with_steps.to_pylist()
    monkeypatch.setenv("TRACEDB_CRITPATH_WORKERS", "2")
    in_workers, none = critpath.what_if(con, values)
    assert len(workers) == 1 and none.num_rows == 0 and in_workers.to_pylist() == steps.to_pylist()
    monkeypatch.setenv("TRACEDB_CRITPATH_WORKERS", "0")
    plain = reports.run(con, "what_if", values).to_pylist()
    full = reports.run(con, "what_if", {**values, "path": "true"}).to_pylist()
    assert len(full) > len(plain) and plain == [r for r in full if r["category"] is None]
