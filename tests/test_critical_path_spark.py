"""The critical path reports on Spark over the lake (analysis/critpath_spark.py): each
rank's step graph built in a Spark task by DuckDB from the rank's Parquet partitions,
the edges across ranks by Spark SQL, the walk on the driver. Real multi-rank jobs
from tests/data/dist give on Spark exactly the rows the database gives
(critical_path, critical_path_summary, what_if; both iterations of each), and where a
rank is late on purpose the job's path crosses to it at a collective that it reached
last, by the raw traces' kernel times.

The jobs: tp2dp2 (4 ranks, TP 2 x DP 2, no straggler) and ddp_shifted: the 2-rank
ddp_straggler capture (rank 1 sleeps 20 ms before its backward) with rank 0's clock
5 ms later (baseTimeNanoseconds), so that rank 0, which waits for rank 1 in the
all-reduces, ends the step last: its path must cross to rank 1."""
import gzip
import json
import shutil
from decimal import Decimal

import pytest

from conftest import DATA
from tracedb.cli import main
from tracedb.ingest import ingest_file
from tracedb.query import engines, lake, reports
from tracedb.store import db

pyspark = pytest.importorskip("pyspark", reason="pyspark not installed (pip install 'tracedb[spark]')")
DIST = DATA / "dist"
SHIFT_NS = 5_000_000
OWN_RULE = "nccl (the database's own rule)"


@pytest.fixture(scope="module")
def job_lake(spark, tmp_path_factory):
    d = tmp_path_factory.mktemp("cpspark")
    shifted = d / "ddp_shifted"
    shifted.mkdir()
    with gzip.open(DIST / "ddp_straggler" / "rank0.json.gz", "rt") as f:
        doc = json.load(f)
    doc["baseTimeNanoseconds"] = int(doc["baseTimeNanoseconds"]) + SHIFT_NS
    with gzip.open(shifted / "rank0.json.gz", "wt", compresslevel=1) as f:
        json.dump(doc, f)
    shutil.copy(DIST / "ddp_straggler" / "rank1.json.gz", shifted / "rank1.json.gz")
    con = db.connect(d / "jobs.duckdb")
    for folder in (DIST / "tp2dp2", shifted):        # as `tracedb ingest FOLDER`: a job of its ranks
        name = folder.name
        for p in sorted(folder.glob("rank*.json.gz")):
            ingest_file(con, p, options={"job": name, "require_rank": True, "run_prefix": name + "."})
    # a rule of this database's own (`tracedb settings`): the lake carries it, and the
    # ranks' graphs built on Spark must type the NCCL kernels by it, as the database does
    con.execute("INSERT INTO layer_rules BY NAME SELECT 1 AS priority, 'kernel' AS field, "
                "'^ncclDevKernel' AS pattern, ? AS layer_type", [OWN_RULE])
    lake.export(con, d / "lake")
    yield con, d / "lake"
    con.close()


_MEMO = {}


def both(job_lake, name, params):
    """(DuckDB's rows, Spark's rows) of a report, each run once per module."""
    key = (name, tuple(sorted(params.items())))
    if key not in _MEMO:
        con, lk = job_lake
        _MEMO[key] = (reports.run(con, name, params).to_pylist(), engines.run_spark(name, params, lk).to_pylist())
    return _MEMO[key]


CASES = [("critical_path_summary", {"job": "tp2dp2", "iteration": "all"}),
         ("critical_path", {"job": "ddp_shifted", "iteration": "all"})]


@pytest.mark.parametrize("name,params", CASES)
def test_same_rows_on_spark(job_lake, name, params):
    """Row for row, in order, the values DuckDB gives, for both iterations: the time of
    tp2dp2's path (4 ranks, two kinds of process group) by category and layer type,
    with its segments counted; ddp_shifted's path, segment by segment."""
    d, s = both(job_lake, name, params)
    assert len(d) > 0 and s == d
    assert {r["iteration"] for r in d} == {2, 3}


def raw_nccl(path, shift=0):
    """The NCCL kernels of a raw trace, by start: (start_ns, end_ns) on the database's
    clock (baseTimeNanoseconds + ts), independent of tracedb."""
    with gzip.open(path, "rt") as f:
        doc = json.load(f, parse_float=Decimal)
    base = int(doc["baseTimeNanoseconds"]) + shift
    out = [(base + int(e["ts"] * 1000), base + int((e["ts"] + e["dur"]) * 1000)) for e in doc["traceEvents"]
           if e.get("ph") == "X" and e.get("cat") == "kernel" and e["name"].startswith("ncclDevKernel")]
    return sorted(out)


def test_job_path_crosses_to_the_late_rank(job_lake):
    """ddp_shifted: rank 0 ends the step last, so its path starts there; walking back it
    meets an all-reduce that rank 1 reached last and crosses to rank 1 (edge
    'collective') at rank 1's kernel start; before that the path is rank 1's, its 20 ms
    sleep on it. Checked per iteration against the raw traces: the crossing starts at
    a rank-1 NCCL kernel's start, the same call's kernel on rank 0 (the same place from
    the end of each trace: the ranks make the same calls, rank 0's trace holds two more
    from the warm-up) started before it, and the segment ends where that kernel ended.
    The same rows as DuckDB's (test_same_rows_on_spark)."""
    _, rows = both(job_lake, "critical_path", {"job": "ddp_shifted", "iteration": "all"})
    k0 = raw_nccl(DIST / "ddp_straggler" / "rank0.json.gz", SHIFT_NS)
    k1 = raw_nccl(DIST / "ddp_straggler" / "rank1.json.gz")
    for it in (2, 3):
        path = sorted((r for r in rows if r["iteration"] == it), key=lambda r: r["seq"])
        cross = [k for k, r in enumerate(path) if r["edge"] == "collective"]
        assert len(cross) == 1
        c = path[cross[0]]
        assert c["run"] == "ddp_shifted.rank0" and c["category"] == "communication"
        assert c["layer_type"] == OWN_RULE          # the lake's layer_rules, not the shipped ones
        assert {r["rank"] for r in path[:cross[0]]} == {1} and {r["rank"] for r in path[cross[0]:]} == {0}
        assert all(a["start_ns"] + a["dur_ns"] == b["start_ns"] for a, b in zip(path, path[1:]))
        assert any(r["what"] == "straggler_sleep_20ms" for r in path[:cross[0]])
        j = [s for s, _ in k1].index(c["start_ns"]) - len(k1)        # rank 1's kernel, from the end
        start0, end0 = k0[j]
        assert start0 < c["start_ns"] and c["start_ns"] + c["dur_ns"] == end0


def test_cli_spark_engine_for_a_job(job_lake, tmp_path):
    """`tracedb query what_if --engine spark --lake DIR --param job=...`: the rows of
    the database's report (rank 1's lateness removed, and the new path by category),
    for both iterations; the prediction is a saving (rank 1 arrives ~20 ms late)."""
    con, lk = job_lake
    params = {"job": "ddp_shifted", "iteration": "all", "remove_rank_lateness": "1", "path": "true"}
    out = tmp_path / "w.json"
    assert main(["query", "what_if", "--engine", "spark", "--lake", str(lk), "--format", "json", "--output", str(out)]
                + [a for k, v in params.items() for a in ("--param", f"{k}={v}")]) == 0
    d = reports.run(con, "what_if", params).to_pylist()
    got = json.loads(out.read_text())
    assert len(got) == len(d) > 2 and got == d
    steps = [r for r in got if r["category"] is None]
    assert [r["iteration"] for r in steps] == [2, 3] and all(r["saving_ns"] > 5e6 for r in steps)


def test_one_runs_summary_with_power_refused_on_spark(job_lake, tmp_path, capsys):
    """One run's critical_path_summary integrates its power log (DuckDB only): on a lake
    that holds power logs `--engine spark` without job= is one line on stderr naming the
    lake, exit 1, before Spark is asked for anything (the lake's manifest is read)."""
    _, lk = job_lake
    other = tmp_path / "lake"
    other.mkdir()
    m = json.loads((lk / "manifest.json").read_text())
    m["datasets"].append("power")
    (other / "manifest.json").write_text(json.dumps(m))
    assert main(["query", "critical_path_summary", "--engine", "spark", "--lake", str(other),
                 "--param", "run=ddp_shifted.rank0"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(other) in err[0] and "job=NAME" in err[0]


def test_a_run_the_lake_lacks_is_named(job_lake):
    """A misspelt run is an error naming the lake and the nearest run, before Spark
    reads anything (it gave no rows and exit 0)."""
    _, lk = job_lake
    with pytest.raises(reports.ReportError, match=r"no run named 'ddp_shifted.rank9' in the lake .*ddp_shifted.rank"):
        engines.run_spark("critical_path", {"run": "ddp_shifted.rank9"}, lk)
