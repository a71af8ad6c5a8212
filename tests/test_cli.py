"""The command line as a user runs it: exit codes, one-line errors, output formats."""
import csv
import io
import json
import subprocess
import sys

import pyarrow.parquet as pq

from conftest import DATA

AMP = str(DATA / "torch" / "h100_resnet50_bs64_amp.json.gz")
LENET = str(DATA / "tf" / "cpu_sync_lenet_bs64.json.gz")


def tracedb(*args):
    return subprocess.run([sys.executable, "-m", "tracedb.cli", *args], capture_output=True, text=True)


def test_ingest_query_sql_formats(tmp_path):
    db = str(tmp_path / "c.duckdb")
    r = tracedb("ingest", AMP, LENET, "--db", db)
    assert r.returncode == 0, r.stderr
    assert "as run h100_resnet50_bs64_amp" in r.stdout and "905 kernels" in r.stdout
    again = tracedb("ingest", AMP, "--db", db)
    assert again.returncode == 0 and "skipped" in again.stdout

    r = tracedb("query", "gpu_utilization", "--db", db, "--run", "h100_resnet50_bs64_amp",
                "--param", "batch_size=64", "--format", "csv")
    assert r.returncode == 0, r.stderr
    (row,) = list(csv.DictReader(io.StringIO(r.stdout)))
    assert row["run"] == "h100_resnet50_bs64_amp" and float(row["samples_per_s"]) > 0

    r = tracedb("query", "overview", "--db", db, "--format", "json")
    assert [o["run"] for o in json.loads(r.stdout)] == ["cpu_sync_lenet_bs64", "h100_resnet50_bs64_amp"]   # one array
    r = tracedb("query", "overview", "--db", db, "--format", "jsonl")                                   # a line a row
    assert [json.loads(l)["run"] for l in r.stdout.splitlines()] == ["cpu_sync_lenet_bs64", "h100_resnet50_bs64_amp"]

    out = tmp_path / "o.parquet"
    r = tracedb("sql", "SELECT run, count(*) AS n FROM kernels GROUP BY run", "--db", db,
                "--format", "parquet", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert pq.read_table(out).to_pylist() == [{"run": "h100_resnet50_bs64_amp", "n": 905}]

    r = tracedb("query", "gpu_utilization", "--db", db, "--format", "table")
    head = r.stdout.split("\u2500")[0]                   # the header lines, above the rule
    assert "gpu_util (%)" in head and "total (ms)" in head and "(3 rows)" in r.stdout   # the unit in the header


def test_answers_are_written_a_batch_at_a_time_and_a_failed_one_leaves_no_file(tmp_path):
    """`tracedb query` and `tracedb sql` write their rows as DuckDB's reader gives them
    (reports.batches, adhoc.run), not all held: in batches of 100 the CSV, JSON lines
    and Parquet of launch_delay (905 kernels) are what its table gives; a query that
    fails part-way (DuckDB's error on the 4,000,001st row, after batches were written)
    exits 1 with one line and leaves no file, nor its temporary one."""
    from tracedb.store import db as tdb
    from tracedb.present import output
    from tracedb.query import reports
    from tracedb.ingest import ingest_file
    path = tmp_path / "c.duckdb"
    con = tdb.connect(path)
    ingest_file(con, AMP)
    table = reports.run(con, "launch_delay", {"run": "h100_resnet50_bs64_amp"})
    assert table.num_rows > 900
    for fmt in ("csv", "json", "jsonl", "parquet"):
        whole, batched = tmp_path / f"whole.{fmt}", tmp_path / f"batched.{fmt}"
        assert output.write(table, fmt, whole) == table.num_rows
        with reports.batches(con, "launch_delay", {"run": "h100_resnet50_bs64_amp"}, rows_per_batch=100) as rows:
            assert output.write(rows, fmt, batched) == table.num_rows
        if fmt == "parquet":
            assert pq.read_table(batched).equals(pq.read_table(whole)) and pq.read_table(whole).equals(table)
        else:
            assert batched.read_bytes() == whole.read_bytes()
    con.close()
    out = tmp_path / "late.csv"
    # the error far down the stream: DuckDB's threads may run a few morsels ahead of the batches
    # written (under load the 1,000,001st row failed before the first batch was out)
    late = "SELECT CASE WHEN i > 4000000 THEN error('row ' || i) ELSE i END AS i FROM range(5000000) t(i)"
    r = tracedb("sql", late, "--db", str(path), "--format", "csv")       # to stdout: rows came before the error
    assert r.returncode == 1 and len(r.stdout.splitlines()) > 1000
    r = tracedb("sql", late, "--db", str(path), "-o", str(out))
    assert r.returncode == 1 and r.stderr.strip().startswith("tracedb: error: sql: Invalid Input Error: row ")
    assert int(r.stderr.split()[-1]) > 1000000 and len(r.stderr.strip().splitlines()) == 1
    r = tracedb("query", "ops", "--db", str(path), "--param", "iteration=77", "-o", str(out))
    assert r.returncode == 1 and "has no iteration 77" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    # DuckDB's other errors met while reading are DuckDB's, not the file's ("cannot write")
    r = tracedb("sql", "SELECT CASE WHEN i > 1000000 THEN 9223372036854775807 + i ELSE i END AS i FROM range(2000000) t(i)",
                "--db", str(path), "-o", str(out))
    assert r.returncode == 1 and r.stderr.startswith("tracedb: error: sql: Out of Range Error: Overflow"), r.stderr
    assert json.loads((tmp_path / "whole.json").read_text()) == \
        [json.loads(l) for l in (tmp_path / "whole.jsonl").read_text().splitlines()]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["batched.csv", "batched.json", "batched.jsonl",
                                                          "batched.parquet", "c.duckdb", "whole.csv", "whole.json",
                                                          "whole.jsonl", "whole.parquet"]
    # a link is written through, its file keeping its mode; a file replaced keeps its mode
    target, link = tmp_path / "real.csv", tmp_path / "link.csv"
    target.write_text("old\n")
    target.chmod(0o640)
    link.symlink_to(target)
    for o in (link, target):
        r = tracedb("sql", "SELECT 42 AS answer", "--db", str(path), "-o", str(o))
        assert r.returncode == 0, r.stderr
        assert link.is_symlink() and target.read_text() == '"answer"\n42\n' and target.stat().st_mode & 0o777 == 0o640
    r = subprocess.run(f"{sys.executable} -m tracedb.cli sql 'SELECT 7 AS n' --db {path} --format csv -o /dev/fd/3 3>{tmp_path}/fd.csv",
                       shell=True, capture_output=True, text=True)      # a file descriptor the shell opened
    assert r.returncode == 0 and (tmp_path / "fd.csv").read_text() == '"n"\n7\n', r.stderr


def test_errors_are_one_line_without_traceback(tmp_path):
    db = str(tmp_path / "c.duckdb")
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [{"ph": "X"}, ')
    bad.with_name("empty.duckdb").write_bytes(b"")
    assert tracedb("ingest", LENET, "--db", db).returncode == 0
    for args, words in [
        (("ingest", str(bad), "--db", db), str(bad)),
        (("ingest", str(tmp_path / "missing.json"), "--db", db), "no such file"),
        (("query", "gpu_utilization", "--db", str(tmp_path / "none.duckdb")), "no such database"),
        (("query", "overview", "--db", str(bad.with_name("empty.duckdb"))), "empty.duckdb: an empty file, not a DuckDB"),
        # said before Spark starts (which took seconds and printed the JVM's warnings first)
        (("query", "overview", "--engine", "spark", "--lake", str(tmp_path / "nolake")), "not a tracedb lake"),
        (("query", "nope", "--db", db), "no report named"),
        (("sql", "SELECT * FROM nowhere", "--db", db), "nowhere"),
        (("query", "gpu_utilization", "--db", db, "--param", "x"), "K=V"),
    ]:
        r = tracedb(*args)
        assert r.returncode != 0, args
        assert "Traceback" not in r.stderr
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and words in lines[0], (args, r.stderr)


def test_values_that_give_wrong_numbers_are_refused_by_name(tmp_path):
    """A parameter value no report can mean (a negative or NaN idle power, a batch
    size of 0, an iteration beyond an INTEGER) is one line naming the report and
    the parameter; before, the report gave negative or NaN energy, or a traceback
    (findings), or 'skipped' rules (advise). Command-line numbers are refused by
    argparse, and a lake export of a run that does not exist says so (it reported
    success)."""
    db = str(tmp_path / "c.duckdb")
    assert tracedb("ingest", AMP, "--db", db).returncode == 0
    for args, line in [
        (("query", "energy_summary", "--param", "idle_power_w=-1"),
         "report energy_summary: parameter idle_power_w must be >= 0, got '-1'"),
        (("query", "energy_summary", "--param", "idle_power_w=nan"),
         "report energy_summary: parameter idle_power_w must be DOUBLE >= 0, got 'nan'"),
        (("query", "utilization_levels", "--param", "batch_size=0"),
         "report utilization_levels: parameter batch_size must be > 0, got '0'"),
        (("query", "gpu_utilization", "--param", "batch_size=abc"),
         "report gpu_utilization: parameter batch_size must be INTEGER > 0, got 'abc'"),
        (("query", "findings", "--param", "iteration=99999999999999999999"),
         "report findings: parameter iteration must be an iteration number or all, got '99999999999999999999'"),
        (("query", "ops", "--param", "iteration=2147483648"),
         "report ops: parameter iteration must be an iteration number or all, got '2147483648'"),
        (("advise", "--iteration", "99999999999999999999"),
         "parameter iteration must be an iteration number or all, got '99999999999999999999'"),
        (("query", "findings", "--param", "thresholds=host_bound=nan"),
         "thresholds: 'host_bound=nan': 'nan' is not a number"),
        (("query", "compare_runs", "--param", "runs=h100_resnet50_bs64_amp", "--param", "batch_sizes=6a"),
         "report compare_runs: batch_sizes 6a holds a size that is not a whole number above 0"),
        (("query", "compare_runs", "--param", "runs=h100_resnet50_bs64_amp", "--param", "batch_sizes=64,64"),
         "report compare_runs: batch_sizes gives 2 sizes for 1 runs"),
        (("export", "--lake", str(tmp_path / "lake"), "--run", "nope"),
         "export: no run nope in the database (see: tracedb query overview)"),
    ]:
        r = tracedb(*args, "--db", db)
        assert r.returncode == 1 and r.stderr.strip() == f"tracedb: error: {line}", (args, r.stderr)
    assert not (tmp_path / "lake").exists()
    for args, line in [
        (("ingest", AMP, "--jobs", "0"), "argument --jobs: must be a whole number above 0, got '0'"),
        (("diff", "a", "b", "--threshold", "nan"), "argument --threshold: must be a number from 0, got 'nan'"),
        (("report", "--run", "a", "-o", "x.html", "--batch-size", "-1"),
         "argument --batch-size: must be a whole number above 0, got '-1'"),
    ]:
        r = tracedb(*args, "--db", db)
        assert r.returncode == 2 and r.stderr.strip().endswith(line), (args, r.stderr)
    r = tracedb("query", "top_kernels", "--db", db, "--param", "limit=1", "--param", "iteration=2", "--format", "csv")
    assert r.returncode == 0 and len(list(csv.DictReader(io.StringIO(r.stdout)))) == 1
    r = tracedb("query", "top_kernels", "--db", db, "--param", "iteration=2", "--param", "iteration=3")
    assert r.returncode == 1 and r.stderr.strip() == ("tracedb: error: --param iteration given twice ('2' and '3'; "
                                                      "--run is the run parameter): give it once")
    r = tracedb("query", "top_kernels", "--db", db, "--run", "h100_resnet50_bs64_amp", "--param", "run=other")
    assert r.returncode == 1 and "--param run given twice ('h100_resnet50_bs64_amp' and 'other'" in r.stderr
    r = tracedb("query", "overview", "--db", db, "-o", "")
    assert r.returncode == 1 and r.stderr.strip() == "tracedb: error: -o: empty file name"
    assert tracedb("sql", "SELECT 1", "--db", db, "--wait", "inf").returncode == 0       # inf: until it is free
    r = tracedb("sql", "SELECT 1", "--db", db, "--wait", "nan")
    assert r.returncode == 2 and "argument --wait: must be a number of seconds from 0, or inf" in r.stderr
    # the Python API: None is the default (limit=None gave no rows), and a header whose
    # default its own floor refuses is a broken report
    from tracedb.store import db as tdb
    from tracedb.query import reports
    con = tdb.connect(db, read_only=True)
    got = reports.run(con, "top_kernels", {"run": "h100_resnet50_bs64_amp", "limit": None})
    con.close()
    assert got.num_rows == 20
    bad = reports.parse("-- name: x\n-- description: d\n-- parameters:\n--   limit INTEGER > 0 = 0: rows\n"
                        "SELECT $limit", "x")
    assert bad.problems == ["limit: parameter default must be > 0, got '0'"]


def test_reports_lists_descriptions():
    r = tracedb("reports")
    assert r.returncode == 0 and "gpu_utilization" in r.stdout and "overview" in r.stdout


def test_demo_runs_on_shipped_sample(tmp_path):
    r = tracedb("demo", "--db", str(tmp_path / "demo.duckdb"), "--format", "csv")
    assert r.returncode == 0, r.stderr
    row = list(csv.DictReader(io.StringIO(r.stdout.split("\n\n", 1)[1])))[0]
    assert row["iteration"] == "2" and 0 < float(row["gpu_util_pct"]) < 100
    assert float(row["gpu_util_pct"]) >= float(row["smsp_active_pct_iter"]) >= float(row["issue_slot_pct_iter"]) \
        >= float(row["tc_issue_pct_iter"]) > 0
    assert "matched 852 of 852 ncu kernels" in r.stdout


def test_chart_command(tmp_path):
    dbp = str(tmp_path / "demo.duckdb")
    assert tracedb("demo", "--db", dbp, "--format", "csv").returncode == 0
    r = tracedb("chart", "levels", "--db", dbp, "-o", str(tmp_path / "l.svg"))
    assert r.returncode == 0 and (tmp_path / "l.svg").read_text().lstrip().startswith("<svg")
    r = tracedb("chart", "levels", "--db", dbp, "-o", str(tmp_path / "l.pdf"))
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == [f"tracedb: error: {tmp_path / 'l.pdf'}: chart files are .html, .png, .svg or .json"]


def test_a_failed_ingest_into_a_new_database_leaves_no_file(tmp_path):
    """An ingest whose every file fails leaves no database behind when the command
    made it (an empty one looked like a load); an existing database, or one where
    a file landed, stays."""
    bad = tmp_path / "cut.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": ')
    db = tmp_path / "new.duckdb"
    r = tracedb("ingest", str(bad), "--db", str(db))
    assert r.returncode == 1 and str(bad) in r.stderr
    assert not db.exists() and not (tmp_path / "new.duckdb.wal").exists()
    r = tracedb("ingest", str(bad), AMP, "--db", str(db))           # one lands: the database stays
    assert r.returncode == 1 and db.exists()
    r = tracedb("ingest", str(bad), "--db", str(db))                # an existing database stays
    assert r.returncode == 1 and db.exists()
    out = tracedb("sql", "SELECT count(*) AS n FROM runs", "--db", str(db), "--format", "csv")
    assert list(csv.reader(io.StringIO(out.stdout))) == [["n"], ["1"]]
