"""iteration=all of the critical path reports reads the step graph a chunk of
iterations at a time (analysis/critpath.py graphs(): the views once per chunk, in
the chunk's window, the next chunk read on a second connection while this one's
graphs are built). Its rows must be exactly the rows each iteration asked for alone
gives (its own window, read on this connection): on real single-rank traces and on
real 2- and 4-rank jobs, for critical_path, critical_path_summary and what_if, with
chunks smaller than the runs (so chunk boundaries fall inside them) and with the
reading done here when no second connection can be made."""
import pytest

from conftest import DATA
from tracedb.analysis import critpath
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
    c = db.connect(path)
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
    t, p = critpath.what_if(con, {**target, **change, "iteration": "all"})
    rows, paths = _by_iteration(t.to_pylist()), _by_iteration(p.to_pylist())
    its = _iterations(con, target)
    assert sorted(rows) == its
    saved = 0
    for it in its:
        t1, p1 = critpath.what_if(con, {**target, **change, "iteration": str(it)})
        assert rows[it] == t1.to_pylist()
        assert paths[it] == p1.to_pylist()
        saved += rows[it][0]["saving_ns"]
    assert saved > 0             # the change does something in these runs: a comparison of substance
