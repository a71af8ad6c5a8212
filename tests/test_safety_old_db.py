"""A database made by an older tracedb (issue 55): read-only commands read it as it
is (this version's missing tables and columns stood in for on the connection
only), with the same rows as the database before it was aged, and the file
unchanged; `tracedb migrate` brings it up to date in place. The aging takes away
what migrate.sql and newer DDL add (power.average_power_w and phase, the
host_samples and gpu_samples tables, the settings' source column) and stamps the
schema version 3, as a file of the revision before 91eb284 has (checked by hand:
that revision's database gave the same Binder Error on `query`)."""
import hashlib
import shutil

import duckdb
import pytest

from conftest import DATA
from tracedb.cli import main

TRACE = DATA / "torch" / "h100_bert_bs16_amp.json.gz"
POWER = DATA / "power" / "h100_bert_bs16_amp.csv"
RUN = "h100_bert_bs16_amp"


@pytest.fixture(scope="module")
def current_and_old(tmp_path_factory):
    d = tmp_path_factory.mktemp("old")
    cur = d / "current.duckdb"
    assert main(["ingest", str(TRACE), str(POWER), "--db", str(cur)]) == 0
    old = d / "old.duckdb"
    shutil.copy(cur, old)
    con = duckdb.connect(str(old))
    con.execute("ALTER TABLE power DROP COLUMN average_power_w")
    con.execute("ALTER TABLE power DROP COLUMN phase")
    con.execute("DROP TABLE host_samples")
    con.execute("DROP TABLE gpu_samples")
    con.execute("CREATE TABLE lr AS SELECT * EXCLUDE (source) FROM layer_rules")
    con.execute("DROP TABLE layer_rules")
    con.execute("ALTER TABLE lr RENAME TO layer_rules")
    con.execute("UPDATE schema_info SET value = '3' WHERE key = 'version'")
    con.execute("UPDATE schema_info SET value = 'old' WHERE key = 'views'")
    con.close()
    return cur, old


def out(capsys, argv):
    capsys.readouterr()
    rc = main(argv)
    o, e = capsys.readouterr()
    assert rc == 0, e
    return o


def digest(p):
    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.mark.parametrize("argv", [["query", "energy_summary", "--run", RUN], ["query", "overview"],
                                  ["query", "utilization_by_layer"],
                                  ["sql", "SELECT count(*) AS n, count(average_power_w) AS a FROM power"],
                                  ["advise", "--format", "csv"]])
def test_read_only_commands_read_an_old_database_as_it_is(current_and_old, capsys, argv):
    cur, old = current_and_old
    before = digest(old)
    assert out(capsys, [*argv, "--db", str(old)]) == out(capsys, [*argv, "--db", str(cur)])
    assert digest(old) == before


def test_report_page_of_an_old_database(current_and_old, tmp_path, capsys):
    cur, old = current_and_old
    before = digest(old)
    assert main(["report", "--run", RUN, "--db", str(old), "-o", str(tmp_path / "r.html")]) == 0
    assert "energy_summary" in capsys.readouterr().out and digest(old) == before


def test_migrate_brings_it_up_to_date(current_and_old, tmp_path, capsys):
    cur, old = current_and_old
    copy = tmp_path / "m.duckdb"
    shutil.copy(old, copy)
    assert out(capsys, ["migrate", "--db", str(copy)]).startswith(f"migrated {copy}: schema version 3 -> ")
    con = duckdb.connect(str(copy), read_only=True)
    cols = {r[0] for r in con.execute("SELECT column_name FROM duckdb_columns() WHERE table_name = 'power'").fetchall()}
    assert {"average_power_w", "phase"} <= cols
    assert con.execute("SELECT count(*) FROM host_samples").fetchone() == (0,)
    con.close()
    q = ["query", "energy_summary", "--run", RUN]
    assert out(capsys, [*q, "--db", str(copy)]) == out(capsys, [*q, "--db", str(cur)])
    assert main(["migrate", "--db", str(tmp_path / "absent.duckdb")]) == 1
