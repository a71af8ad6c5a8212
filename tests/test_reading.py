"""Help that groups and forgives: `tracedb reports` by topic, "did you mean", the
only trace as the default run, the README's notebook example, chart names and
empty charts that say why."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import tracedb
from tracedb.present import charts
from tracedb.store import db
from tracedb.query import reports
from tracedb.query.describe import TOPICS
from tracedb.ingest import ingest_file

from conftest import AMP_TRACE, DATA

ROOT = Path(__file__).parent.parent
AMP = "h100_resnet50_bs64_amp"
LENET = "cpu_async_lenet_bs64"


def cli(*args):
    env = {k: v for k, v in os.environ.items() if k != "TRACEDB_DB"}
    return subprocess.run([sys.executable, "-m", "tracedb.cli", *map(str, args)], capture_output=True, text=True,
                          env=env)


@pytest.fixture(scope="module")
def one(tmp_path_factory):
    """A database holding one trace (the amp ResNet-50)."""
    path = tmp_path_factory.mktemp("one") / "one.duckdb"
    con = db.connect(path)
    ingest_file(con, AMP_TRACE)
    con.close()
    return path


@pytest.fixture(scope="module")
def two(tmp_path_factory, one):
    """The same and a TensorFlow async trace: two trace runs."""
    path = tmp_path_factory.mktemp("two") / "two.duckdb"
    path.write_bytes(one.read_bytes())
    con = db.connect(path)
    ingest_file(con, DATA / "tf" / f"{LENET}.json.gz")
    con.close()
    return path


def test_reports_are_listed_by_topic_one_line_each():
    every = reports.all_reports()
    assert all(r.topic in TOPICS for r in every.values()), [r.name for r in every.values() if r.topic not in TOPICS]
    r = cli("reports")
    assert r.returncode == 0
    lines = r.stdout.splitlines()
    topics = [l[:-1] for l in lines if not l.startswith(" ") and l.endswith(":")]
    assert topics == [t for t in TOPICS if any(x.topic == t for x in every.values())]
    listed, topic = {}, None
    for l in lines:
        if l[:-1] in topics:
            topic = l[:-1]
        elif l.startswith("  "):
            listed[l.split()[0]] = topic
    assert listed == {n: x.topic for n, x in every.items()}          # each report once, under its topic
    assert len(lines) == len(every) + len(topics) + 1                 # one line each, and the hint
    text = cli("reports", "energy_summary").stdout                     # NAME: still the whole header
    assert text.startswith("energy_summary (energy)") and "columns:" in text and "parameters:" in text


def test_did_you_mean(one):
    cases = [(("query", "gpu_utilisation", "--db", one), "no report named 'gpu_utilisation' (did you mean gpu_utilization?)"),
             (("reports", "top_kernel"), "(did you mean top_kernels?)"),
             (("query", "top_kernels", "--db", one, "--param", "limt=3"), "has no parameter limt (did you mean limit?)"),
             (("query", "top_kernels", "--db", one, "--run", "h100_resnet50_bs64"),
              f"no run named 'h100_resnet50_bs64' in the database (did you mean {AMP}?)"),
             (("chart", "levls", "--db", one, "-o", "x.png"), "no chart named 'levls' (did you mean levels?)"),
             (("query", "compare_runs", "--db", one, "--param", f"runs={AMP}_x"), f"(did you mean {AMP}?)")]
    for args, want in cases:
        r = cli(*args)
        assert r.returncode == 1 and want in r.stderr and r.stderr.count("\n") == 1, (args, r.stderr)
    r = cli("query", "top_kernels", "--db", one, "--run", "zzz")         # nothing close: no guess
    assert r.returncode == 1 and "did you mean" not in r.stderr


def test_report_takes_the_only_trace(one, two, tmp_path):
    out = tmp_path / "r.html"
    r = cli("report", "--db", one, "-o", out)
    assert r.returncode == 0 and f"tracedb report: {AMP}" in out.read_text()
    r = cli("report", "--db", two, "-o", tmp_path / "r2.html")
    assert r.returncode == 1 and r.stderr.strip() == (f"tracedb: error: report: the database holds 2 trace runs: "
                                                      f"give --run RUN ({LENET}, {AMP})")
    assert not (tmp_path / "r2.html").exists()


def test_the_readme_chart_example_works(one):
    readme = (ROOT / "README.md").read_text()
    line = next(l for l in readme.splitlines() if ".chart()" in l and "t.query(" in l)
    call = re.search(r"t\.query\([^)]*\)", line).group(0)
    t = tracedb.connect(one)
    fig = eval(call, {"t": t}).chart()                 # the README's own expression
    values = fig.to_dict()["data"]["values"]
    rows = eval(call, {"t": t}).to_polars().to_dicts()
    assert [(v["run"], v["util"]) for v in values] == [(r["run"], r["gpu_util_pct"]) for r in rows]
    assert [v["ms"] for v in values] == [r["total_ns"] / 1e6 for r in rows]


def test_chart_names_and_empty_charts_say_why(one, two, tmp_path):
    fig = charts.build(db.connect(two, read_only=True), "tf_queue", {"run": LENET})
    old = charts.build(db.connect(two, read_only=True), "queue", {"run": LENET})     # the old name still works
    assert sorted(map(str, fig.to_dict()["data"]["values"])) == sorted(map(str, old.to_dict()["data"]["values"]))
    r = cli("chart", "queue", "--db", two, "--run", LENET, "-o", tmp_path / "q.svg")
    assert r.returncode == 0 and "chart tf_queue from report queue_occupancy" in r.stdout
    r = cli("chart", "system", "--db", one, "-o", tmp_path / "s.png")
    assert r.returncode == 1 and r.stderr.count("\n") == 1
    assert "returned no rows: the sampled series come from a power log" in r.stderr and "tracedb power-log" in r.stderr
    assert not (tmp_path / "s.png").exists()
