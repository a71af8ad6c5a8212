"""The Parquet lake, parallel ingest into it, and the saved reports on Spark:
every report that declares Spark support gives the rows DuckDB gives."""
import gzip
import json
import math

import pyarrow.parquet as pq
import pytest

from conftest import AMP_NCU_BASE, DATA, TF, TORCH, run_name
from tracedb.store import db
from tracedb.query import engines
from tracedb.query import lake
from tracedb.query import reports
from tracedb.cli import main
from tracedb.ingest import ingest_file

pyspark = pytest.importorskip("pyspark", reason="pyspark not installed (pip install 'tracedb[spark]')")
AMP = "h100_resnet50_bs64_amp"


@pytest.fixture(scope="module")
def duck_and_lake(spark, tmp_path_factory):
    d = tmp_path_factory.mktemp("lake")
    con = db.connect(d / "f.duckdb")
    for p in TORCH + TF:
        ingest_file(con, p)
    for p in TORCH:
        ingest_file(con, DATA / "power" / (run_name(p) + ".csv"), pair_with=run_name(p))
    ingest_file(con, AMP_NCU_BASE, pair_with=AMP)
    ingest_file(con, DATA / "cupti" / "a100_cupti_range_profiler.json.gz")   # counters of a trace run
    for p in sorted((DATA / "dist" / "ddp_2pg").glob("rank*.json.gz")):    # a 2-rank job: the distributed reports
        ingest_file(con, p)
    lake.export(con, d / "lake")
    yield con, d / "lake"
    con.close()


def same(a, b):
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return a is b
        # ROUND(x, n) may differ in the last digit between engines (half-even vs half-up on binary floats)
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-3) or (math.isnan(a) and math.isnan(b))
    return a == b


def key(row):
    return tuple((v is None, str(v)) for v in row.values())


def test_manifest_lists_datasets_and_runs(duck_and_lake):
    con, lk = duck_and_lake
    m = json.loads((lk / "manifest.json").read_text())
    assert m["partitioned_by"] == ["rank", "run"]
    assert {"events", "kernels", "counters", "iteration_utilization"} <= set(m["datasets"])
    assert {r["run"] for r in m["runs"]} == {r[0] for r in con.execute("SELECT run FROM runs").fetchall()}
    assert (lk / "kernels" / "rank=-1" / f"run={AMP}").is_dir()      # fixtures carry no distributedInfo
    assert (lk / "collectives" / "rank=1").is_dir()                   # but the 2-rank job does


def test_export_runs_under_the_memory_cap_and_writes_every_row(duck_and_lake, monkeypatch, tmp_path):
    """A lake holds views computed whole, so its export runs under the ingest's 1 GiB
    cap (peak RSS of the 10 GB trace's lake: 7.36 GB -> 1.27 GB), with DuckDB's
    partitioned writer flushing a row group at a time (under the cap its default
    thrashed); both settings come back after. Partitions flushed in several row
    groups still hold every row once."""
    con, _ = duck_and_lake
    get = lambda name: con.execute(f"SELECT current_setting('{name}')").fetchone()[0]
    before = (get("memory_limit"), get("partitioned_write_flush_threshold"))
    seen, real = [], lake._copy
    monkeypatch.setattr(lake, "_copy", lambda *a: (seen.append((get("memory_limit"),
                                                                get("partitioned_write_flush_threshold"))), real(*a)))
    monkeypatch.setattr(lake, "ROW_GROUP_ROWS", 100)       # several row groups per partition on these small traces
    lake.export(con, tmp_path / "lake", runs=[AMP])
    assert set(seen) == {("1.0 GiB", 100)} and (get("memory_limit"), get("partitioned_write_flush_threshold")) == before
    for name in ("events", "kernels"):
        files = list((tmp_path / "lake" / name / "rank=-1" / f"run={AMP}").glob("*.parquet"))
        n = con.execute(f"SELECT count(*) FROM {name} WHERE run = ?", [AMP]).fetchone()[0]
        assert n > 900 and sum(pq.ParquetFile(f).metadata.num_row_groups for f in files) > 1
        assert con.execute(f"SELECT count(*), count(DISTINCT event_id) FROM read_parquet({[str(f) for f in files]}) "
                           if name == "events" else
                           f"SELECT count(*), count(DISTINCT kernel_id) FROM read_parquet({[str(f) for f in files]})"
                           ).fetchone() == (n, n)


# (the critical path reports run on Spark through a form of their own, per job:
# tests/test_critical_path_spark.py)
SPARK_REPORTS = [n for n, r in reports.all_reports().items()
                 if "spark" in r.engines and r.prepared_by not in reports.SPARK_FORMS]


def test_reports_declare_their_engines():
    assert len(SPARK_REPORTS) >= 15 and "rank_summary" in SPARK_REPORTS
    assert "energy_breakdown" not in SPARK_REPORTS


def takes_all(name):
    """Whether the report's iteration parameter takes `all` (every iteration and the whole trace)."""
    return reports.all_reports()[name].iteration_all == "sql"


@pytest.mark.parametrize("name,params", [(n, {}) for n in SPARK_REPORTS]
                         + [(n, {"iteration": "all"}) for n in SPARK_REPORTS if takes_all(n)])
def test_report_gives_the_same_rows_on_spark(duck_and_lake, name, params):
    con, lk = duck_and_lake
    d = reports.run(con, name, params).to_pylist()
    s = engines.run_spark(name, params, lk).to_pylist()
    assert len(d) == len(s)
    assert len(d) > 0, name
    for a, b in zip(sorted(d, key=key), sorted(s, key=key)):
        assert a.keys() == b.keys()
        bad = [k for k in a if not same(a[k], b[k])]
        assert not bad, (name, bad, {k: (a[k], b[k]) for k in bad})


def test_duckdb_only_reports_are_refused_on_spark(duck_and_lake):
    with pytest.raises(reports.ReportError, match="runs on DuckDB only"):
        engines.run_spark("energy_summary", {}, duck_and_lake[1])


@pytest.mark.parametrize("dialect", ["spark", "trino", "bigquery", "postgres"])
def test_print_sql_for_dialects(capsys, dialect):
    import sqlglot
    assert main(["query", "utilization_levels", "--print-sql", "--dialect", dialect, "--param", "batch_size=64"]) == 0
    sql = capsys.readouterr().out
    assert "64" in sql and "$batch_size" not in sql
    sqlglot.parse_one(sql, read=dialect)


def rank_files(tmp_path, n=4, slow_rank=2):
    """Rank traces of one job made from the real bert trace: distributedInfo set,
    one rank's step lengthened by 20% (a straggler)."""
    with gzip.open(DATA / "torch" / "h100_bert_bs16_amp.json.gz", "rt") as f:
        doc = json.load(f)
    paths = []
    for rank in range(n):
        d = json.loads(json.dumps(doc))
        d["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": n}
        if rank == slow_rank:
            for e in d["traceEvents"]:
                if str(e.get("name", "")).startswith("ProfilerStep#") and e.get("cat") != "gpu_user_annotation":
                    e["dur"] = e["dur"] * 1.2
        p = tmp_path / f"rank{rank}.json.gz"
        with gzip.open(p, "wt", compresslevel=1) as f:     # (the size is not the point)
            json.dump(d, f)
        paths.append(p)
    return paths


def test_parallel_ingest_into_the_lake_and_rank_summary(spark, tmp_path, capsys):
    paths = rank_files(tmp_path)
    lk = tmp_path / "lake"
    assert main(["ingest", *map(str, paths), "--lake", str(lk), "--jobs", "2"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 4 and all("rank" in l for l in out)
    m = json.loads((lk / "manifest.json").read_text())
    assert sorted(r["rank"] for r in m["runs"]) == [0, 1, 2, 3]
    assert sorted(p.name for p in (lk / "kernels").iterdir()) == ["rank=0", "rank=1", "rank=2", "rank=3"]
    s = engines.run_spark("rank_summary", {}, lk).to_pylist()
    assert [r["rank"] for r in s] == [0, 1, 2, 3]
    # rank 2's step markers are 20% longer: its iteration is the longest (vs_median_pct), but a
    # straggler is a rank late at the collectives (issue 49) and these ranks have none
    assert max(s, key=lambda r: r["vs_median_pct"])["rank"] == 2
    assert [r["straggler"] for r in s] == [False, False, False, False]
    # the same files in a database give the same rows on DuckDB
    con = db.connect(tmp_path / "ranks.duckdb")
    for p in paths:
        ingest_file(con, p)
    d = reports.run(con, "rank_summary", {}).to_pylist()
    for a, b in zip(d, s):
        assert all(same(a[k], b[k]) for k in a)
    # ingesting again is a no-op
    assert main(["ingest", str(paths[0]), "--lake", str(lk)]) == 0
    assert "already in the lake" in capsys.readouterr().out
