"""Reports, charts and the Python API run with other files out of reach (issue 55):
a database made elsewhere whose `runs` is a view over read_text puts no local file
into a report, a page or a result (plain DuckDB on the same file does read it: the
control); `tracedb sql` cannot write into DuckDB's temp directory beside the
database, nor read a link planted there; the API's sql() is tracedb sql's sandbox."""
import os
import shutil
import stat

import duckdb
import pytest

import tracedb
from conftest import DATA
from tracedb.cli import main

SYNC = "cpu_sync_lenet_bs64"
SECRET = "top-secret-4711"


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    d = tmp_path_factory.mktemp("sandbox")
    path = d / "plain.duckdb"
    assert main(["ingest", str(DATA / "tf" / f"{SYNC}.json.gz"), "--db", str(path)]) == 0
    return path


@pytest.fixture
def evil(plain, tmp_path):
    """A copy whose runs table is a view putting a local file's text in `path`."""
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET)
    path = tmp_path / "evil.duckdb"
    shutil.copy(plain, path)
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE runs_real AS SELECT * FROM runs")
    con.execute("DROP TABLE runs")
    con.execute(f"CREATE VIEW runs AS SELECT r.* REPLACE (s.content AS path) FROM runs_real r, "
                f"read_text('{secret}') s")
    assert SECRET in str(con.execute("SELECT path FROM runs").fetchall())      # the control: it reads
    con.close()
    return path


@pytest.mark.parametrize("argv", [["query", "overview"], ["report", "--run", SYNC, "-o", "{tmp}/r.html"],
                                  ["advise", "--run", SYNC], ["sql", "SELECT path FROM runs"],
                                  ["chart", "levels", "-o", "{tmp}/c.html"]])
def test_a_stored_view_cannot_read_a_local_file_into_the_output(evil, tmp_path, capsys, argv):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    rc = main([*argv, "--db", str(evil)])
    out, err = capsys.readouterr()
    assert rc == 1 and SECRET not in out + err
    assert err.count("\n") == 1 and "Permission Error" in err and "secret.txt" in err, err
    assert not any(SECRET in p.read_text() for p in tmp_path.glob("*.html"))


def test_the_api_query_and_sql_cannot_read_it_either(evil):
    t = tracedb.connect(evil)
    for call in (lambda: t.query("overview"), lambda: t.sql("SELECT path FROM runs")):
        with pytest.raises(duckdb.PermissionException):
            call()
    with tracedb.connect(evil) as held:             # a read-only block: the same
        with pytest.raises(duckdb.PermissionException):
            held.query("overview")


def test_api_sql_is_the_sandbox_of_tracedb_sql(plain, tmp_path):
    t = tracedb.connect(plain)
    assert t.sql("SELECT run FROM runs").to_arrow().to_pylist() == [{"run": SYNC}]
    (tmp_path / "f.txt").write_text(SECRET)
    for q in (f"SELECT * FROM read_text('{tmp_path}/f.txt')",
              f"COPY (SELECT 1) TO '{tmp_path}/out.csv'",
              "SET enable_external_access = true",
              f"ATTACH '{tmp_path}/other.duckdb'"):
        with pytest.raises(duckdb.Error):
            t.sql(q)
    assert not (tmp_path / "out.csv").exists() and not (tmp_path / "other.duckdb").exists()
    with tracedb.connect(plain, read_only=False) as w:
        with pytest.raises(PermissionError, match="sql\\(\\) runs sandboxed"):
            w.sql("SELECT 1")


def test_sql_cannot_reach_duckdbs_temp_directory(plain, tmp_path, capsys):
    """DuckDB allows its temp directory with external access off: it is no longer
    <db>.tmp beside the database but a private folder of the process."""
    d = tmp_path / "db"
    d.mkdir()
    path = d / "x.duckdb"
    shutil.copy(plain, path)
    tmpdir = d / "x.duckdb.tmp"
    tmpdir.mkdir()
    (tmp_path / "other.txt").write_text(SECRET)
    os.symlink(tmp_path / "other.txt", tmpdir / "link.txt")
    for q in (f"COPY (SELECT 42 AS a) TO '{tmpdir}/w.csv'", f"SELECT * FROM read_text('{tmpdir}/link.txt')",
              f"SELECT * FROM read_text('{tmpdir}/*')"):
        assert main(["sql", q, "--db", str(path)]) == 1
        out, err = capsys.readouterr()
        assert SECRET not in out and "Permission Error" in err
    assert sorted(p.name for p in tmpdir.iterdir()) == ["link.txt"]
    assert main(["sql", "SELECT current_setting('temp_directory') AS t", "--db", str(path),
                 "--format", "json"]) == 0
    spill = __import__("json").loads(capsys.readouterr().out)[0]["t"]        # --format json: one array
    assert not spill.startswith(str(d)) and stat.S_IMODE(os.stat(spill).st_mode) == 0o700
