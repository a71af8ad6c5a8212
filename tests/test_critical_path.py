"""The step graph (schema/views/step_graph.sql) and the critical_path /
critical_path_summary reports on real traces: the path tiles the step, a host
gap shows as CPU on the path where the GPU waited for it, a rank's wait for a
late rank is named, a job's path crosses to the late rank's own sleep, and a
trace without correlation gives 'unknown dependency' segments, never a silent
path. Values compared with the raw trace files."""
import gzip
import json
import statistics
from decimal import Decimal

import pytest

from conftest import DATA
from tracedb.analysis import critpath
from tracedb.cli import main
from tracedb.query import reports
from tracedb.store import db

WHATIF = DATA / "whatif"
DIST = DATA / "dist"


def raw(path):
    with gzip.open(path, "rt") as f:
        return json.load(f, parse_float=Decimal)["traceEvents"]


def ns(us):
    return int(Decimal(str(us)) * 1000)


@pytest.fixture(scope="module")
def con(tmp_path_factory):
    path = tmp_path_factory.mktemp("cp") / "cp.duckdb"
    assert main(["ingest", str(WHATIF / "hostgap_a.json.gz"), str(WHATIF / "loader_a.json.gz"),
                 str(DIST / "ddp_straggler"), str(DIST / "ddp"), "--db", str(path)]) == 0
    c = db.connect(path)
    yield c
    c.close()


@pytest.mark.parametrize("run", ["hostgap_a", "loader_a", "ddp_straggler.rank0"])
def test_path_tiles_the_step(con, run):
    """Segments are contiguous, start at the iteration's start and end at the latest
    end of its events; where that is the iteration's end, they add up to step_ns."""
    rows = reports.run(con, "critical_path", {"run": run, "iteration": "all"}).to_pylist()
    its = dict(con.execute("SELECT iteration, start_ns FROM iterations WHERE run = ?", [run]).fetchall())
    by_it = {}
    for r in rows:
        by_it.setdefault(r["iteration"], []).append(r)
    assert set(by_it) == set(its)
    for it, segs in by_it.items():
        segs.sort(key=lambda r: r["seq"])
        assert segs[0]["start_ns"] == its[it]
        for a, b in zip(segs, segs[1:]):
            assert a["start_ns"] + a["dur_ns"] == b["start_ns"]
        last = con.execute("SELECT max(end_ns) FROM step_graph_nodes WHERE run = ? AND iteration = ?",
                           [run, it]).fetchone()[0]
        assert segs[-1]["start_ns"] + segs[-1]["dur_ns"] == last
        if last == its[it] + segs[0]["step_ns"]:
            assert sum(s["dur_ns"] for s in segs) == segs[0]["step_ns"]


def test_host_gap_on_the_path(con):
    """hostgap_a: 3 ms of host Python in record_function host_prep; the GPU runs its
    ~1.3 ms of queued work, then waits for the kernels launched after the range: the
    whole range is on the path (its duration from the raw file), as CPU time. How
    much of it a removal would save is what_if's (tests/test_what_if_validation.py)."""
    rows = reports.run(con, "critical_path", {"run": "hostgap_a", "iteration": "all"}).to_pylist()
    base = con.execute("SELECT base_time_ns FROM runs WHERE run = 'hostgap_a'").fetchone()[0]
    prep = {ns(e["ts"]) + base: ns(e["dur"]) for e in raw(WHATIF / "hostgap_a.json.gz")
            if e.get("name") == "host_prep" and e.get("ph") == "X"}
    on_path = {}
    for r in rows:
        if r["what"] == "host_prep":
            assert r["category"] == "cpu op"
            on_path[r["iteration"]] = on_path.get(r["iteration"], 0) + r["dur_ns"]
    its = con.execute("SELECT iteration, start_ns, end_ns FROM iterations WHERE run = 'hostgap_a'").fetchall()
    assert len(on_path) == len(its) == 6
    for it, s, e in its:
        mine = [d for t, d in prep.items() if s <= t <= e]
        assert len(mine) == 1
        assert abs(on_path[it] - mine[0]) <= 0.01 * mine[0]


def test_waiting_for_another_rank(con):
    """ddp_straggler: rank 0 waits ~20 ms for rank 1 in the gradient all-reduce
    (tests/data/dist/README.md); the per-rank path names it. In the unperturbed ddp
    job the wait is a few ms at most."""
    def waited(run):
        rows = reports.run(con, "critical_path_summary", {"run": run}).to_pylist()
        return sum(r["dur_ns"] for r in rows if r["category"] == "waiting for another rank")
    late = waited("ddp_straggler.rank0")
    assert late > waited("ddp.rank0") + 10e6
    assert waited("ddp_straggler.rank1") < 2e6

    def longest(run):
        rows = reports.run(con, "critical_path", {"run": run}).to_pylist()
        return max(r["dur_ns"] for r in rows if r["category"] == "waiting for another rank")
    # the gating all-reduce: README's 26.7 / 26.3 ms kernels, less their transfer
    assert 20e6 < longest("ddp_straggler.rank0") < 26.8e6
    assert longest("ddp.rank0") < 10e6


def test_job_path_crosses_to_the_late_rank(con):
    """Per job the path is rank 1's, the late rank, whose 20 ms sleep
    (straggler_sleep_20ms, duration from the raw trace) lies on it; nobody waits on it
    (rank 0's wait is beside the path)."""
    rows = reports.run(con, "critical_path", {"job": "ddp_straggler"}).to_pylist()
    assert {r["rank"] for r in rows} == {1}
    sleep = [r for r in rows if r["what"] == "straggler_sleep_20ms"]
    assert sleep and all(r["rank"] == 1 for r in sleep)
    raw_sleep = [ns(e["dur"]) for e in raw(DIST / "ddp_straggler" / "rank1.json.gz")
                 if e.get("name") == "straggler_sleep_20ms" and e.get("ph") == "X"]
    on = sum(r["dur_ns"] for r in sleep)
    assert min(raw_sleep) * 0.9 <= on <= max(raw_sleep)
    assert not any(r["category"] == "waiting for another rank" for r in rows)


def test_missing_correlation_named(con, tmp_path):
    """A trace whose correlation ids and flow events are removed: its kernels have no
    launch, and the path says so ('unknown dependency', missing_edge launch) where
    the GPU waited for the host, instead of a path without the host gap."""
    events = []
    with gzip.open(WHATIF / "hostgap_a.json.gz", "rt") as f:
        doc = json.load(f)
    for e in doc["traceEvents"]:
        if e.get("ph") in ("s", "f"):
            continue
        if isinstance(e.get("args"), dict):
            e["args"].pop("correlation", None)
        events.append(e)
    doc["traceEvents"] = events
    p = tmp_path / "nocorr.json"
    p.write_text(json.dumps(doc))
    dbp = tmp_path / "nc.duckdb"
    assert main(["ingest", str(p), "--db", str(dbp)]) == 0
    c = db.connect(dbp)
    try:
        rows = reports.run(c, "critical_path", {"run": "nocorr"}).to_pylist()
        unknown = [r for r in rows if r["category"] == "unknown dependency"]
        assert unknown and {r["missing_edge"] for r in unknown} == {"launch"}
        # the host gap (host_prep, less the queued work) is what is unknown
        assert 1.0e6 < sum(r["dur_ns"] for r in unknown) < 3.0e6
        assert sum(r["dur_ns"] for r in rows) == rows[0]["step_ns"]
    finally:
        c.close()
    # the same trace with its correlation: no unknown dependency
    rows = reports.run(con, "critical_path", {"run": "hostgap_a"}).to_pylist()
    assert not [r for r in rows if r["category"] == "unknown dependency"]


def test_graph_node_gap_constant():
    """GRAPH_NODE_GAP_NS is the median gap between consecutive kernels of one stream
    inside one cudaGraphLaunch of h200_graph_train, computed from the raw file."""
    ev = raw(DATA / "graph_h200" / "h200_graph_train.json.gz")
    launches = {e["args"]["correlation"] for e in ev if e.get("name") in ("cudaGraphLaunch", "cudaGraphLaunch_v10000")
                and isinstance(e.get("args"), dict)}
    groups = {}
    for e in ev:
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and e.get("ph") == "X" \
                and e["args"].get("correlation") in launches:
            groups.setdefault((e["args"]["correlation"], e["args"].get("stream")), []).append(
                (ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])))
    gaps = []
    for ks in groups.values():
        ks.sort()
        gaps += [b[0] - a[1] for a, b in zip(ks, ks[1:])]
    assert len(gaps) > 100
    assert critpath.GRAPH_NODE_GAP_NS == statistics.median(gaps)


def test_summary_shares_add_up(con):
    rows = reports.run(con, "critical_path_summary", {"run": "loader_a"}).to_pylist()
    assert sum(r["dur_ns"] for r in rows) == rows[0]["step_ns"]
    assert abs(sum(r["share_pct"] for r in rows) - 100) < 0.1
    # the data loader's sleep (3 ms a step in A) is CPU time on the path
    path = reports.run(con, "critical_path", {"run": "loader_a"}).to_pylist()
    loader = sum(r["dur_ns"] for r in path if r["what"].startswith("enumerate(DataLoader)"))
    assert 2.5e6 < loader < 3.5e6


def test_perfetto_track_and_html_section(con, tmp_path):
    """export --perfetto writes the path as slices on tracedb's 'critical path' track
    (tid 4), one per segment of the report, at its times; the HTML report shows the
    summary right after the overview."""
    from tracedb.present import html_report, perfetto
    out = tmp_path / "hg.json"
    perfetto.export(con, "hostgap_a", str(out))
    with open(out) as f:
        events = json.load(f, parse_float=Decimal)["traceEvents"]
    track = [e for e in events if e.get("cat") == "tracedb" and e.get("tid") == 4]
    base = con.execute("SELECT base_time_ns FROM runs WHERE run = 'hostgap_a'").fetchone()[0]
    rows = [r for r in reports.run(con, "critical_path", {"run": "hostgap_a", "iteration": "all"}).to_pylist()
            if r["dur_ns"] > 0]
    assert len(track) == len(rows)
    got = sorted((ns(e["ts"]) + base, ns(e["dur"]), e["args"]["category"]) for e in track)
    assert got == sorted((r["start_ns"], r["dur_ns"], r["category"]) for r in rows)
    _, ids = html_report.build(con, "hostgap_a")
    assert ids[:3] == ["overview", "critical_path_summary", "findings"]


@pytest.mark.parametrize("run", ["hostgap_a", "loader_a", "ddp_straggler.rank0"])
def test_one_iteration_read_in_its_window_gives_the_same_path(con, run):
    """One iteration's graph is read with the views narrowed to its window
    (tracedb_step_window); the path is the one the whole run's graph gives."""
    for (it,) in con.execute("SELECT iteration FROM iterations WHERE run = ?", [run]).fetchall():
        narrow = critpath.load(con, run, it)
        whole = critpath.load(con, run, it, None, {})
        assert critpath.path_rows(narrow, critpath.critical_path(narrow), run, None, it) == \
            critpath.path_rows(whole, critpath.critical_path(whole), run, None, it)
        assert critpath.replay(narrow, critpath.Change(remove_syncs=True))[0] == \
            critpath.replay(whole, critpath.Change(remove_syncs=True))[0]


@pytest.mark.parametrize("run, job", [("hostgap_a", None), ("loader_a", None), ("ddp_straggler.rank0", None),
                                      ("ddp.rank1", None), (None, "ddp_straggler"), (None, "ddp")])
def test_one_iteration_made_python_alone_is_the_graph_of_its_window(con, run, job):
    """load() reads one iteration's window as a chunk of one (chunk_rows: the nodes of
    the iteration alone, the edges into them, the window's other rows left Arrow): the
    graph is the one made from every row of the window as Python rows (the form
    before), node for node and edge for edge."""
    runs = critpath._runs_of(con, run, job)
    names = [r for r, _ in runs]
    its = con.execute("SELECT DISTINCT iteration FROM iterations WHERE run IN (SELECT unnest(?)) ORDER BY 1",
                      [names]).fetchall()
    assert its
    for (it,) in its:
        with critpath.step_window(con, *critpath._window_of(con, names, it), names):
            before = critpath._load(con, critpath.Graph(), runs, it, job, {})
        now = critpath.load(con, run, it, job)
        assert (now is None) == (before is None)
        if now is not None:
            assert now.nodes and now.nodes == before.nodes and now.preds == before.preds
            assert (now.after_open, now.open_sets, now.dur_ns) == (before.after_open, before.open_sets, before.dur_ns)
