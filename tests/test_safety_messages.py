"""Unclear messages made clear, and Windows line ends read (issue 55): CRLF power
logs load the same samples as their LF originals; duplicate JSON keys are named;
JSON nested too deep before any traceEvents says so; a saved report on Spark over a
lake of CPU-only traces is one line naming what the lake lacks (no Spark started)."""
import gzip

import pytest

from conftest import DATA

from tracedb.cli import main
from tracedb.ingest import IngestError, ingest_file

POWER = DATA / "power"


SAMPLER = POWER / "h100_bert_bs16_amp.csv"       # written with CRLF line ends (Windows), 362 samples
COLS = "ts_ns, gpu, power_w, energy_j, instant_power_w, sm_clock_mhz, temp_c"


@pytest.mark.parametrize("variant", ["lf", "crlf_cut_after_cr", "cr_only", "cr_cr_lf", "smi_crlf"])
def test_power_logs_with_cr_line_ends_read_as_the_original(fresh_db, tmp_path, variant):
    """The CRLF fixture as LF, as CRLF whose last line ends after its CR (it was dropped
    as cut off), with CR alone (it loaded one sample) and CR CR LF (a log converted
    twice: DuckDB's sniffer failed); an nvidia-smi log in CRLF: the same samples."""
    if variant == "smi_crlf":
        orig = POWER / "h200_nvidia_smi_units.csv.gz"
        data = gzip.open(orig, "rb").read().replace(b"\n", b"\r\n")
    else:
        orig = SAMPLER
        crlf = SAMPLER.read_bytes()
        assert crlf.count(b"\r\n") == 363 and crlf.endswith(b"\r\n")
        lf = crlf.replace(b"\r\n", b"\n")
        data = {"lf": lf, "crlf_cut_after_cr": crlf[:-1], "cr_only": lf.replace(b"\n", b"\r"),
                "cr_cr_lf": lf.replace(b"\n", b"\r\r\n")}[variant]
    p = tmp_path / f"{variant}.csv"
    p.write_bytes(data)
    a = ingest_file(fresh_db, p, options={"tz": "UTC"}).run
    b = ingest_file(fresh_db, orig, options={"tz": "UTC"}).run
    got = fresh_db.execute(f"SELECT {COLS} FROM power WHERE run = ? ORDER BY ts_ns, gpu", [a]).fetchall()
    assert len(got) in (362, 596)
    assert got == fresh_db.execute(f"SELECT {COLS} FROM power WHERE run = ? ORDER BY ts_ns, gpu", [b]).fetchall()
    assert not fresh_db.execute("SELECT * FROM ingest_log WHERE run = ? AND level = 'warning'", [a]).fetchall()


EVENT = '{"ph": "X", "ts": 1, "dur": 2, "name": "a"}'


@pytest.mark.parametrize("text,words", [
    ('{"traceEvents": [{"ph": "X", "ts": 1, "dur": 2, "name": "a", "name": "b"}]}',
     "an event has the key 'name' twice (duplicate JSON keys"),
    (f'{{"traceEvents": [{EVENT}], "traceEvents": [{EVENT}, {EVENT}]}}', "the top-level key 'traceEvents' appears twice"),
    (f'{{"distributedInfo": {{"rank": 0}}, "distributedInfo": {{"rank": 1}}, "traceEvents": [{EVENT}]}}',
     "the top-level key 'distributedInfo' appears twice"),
    (f'{{"traceEvents": [{EVENT}], "deviceProperties": [], "deviceProperties": [1]}}',
     "the top-level key 'deviceProperties' appears twice"),
    ('{"deep": ' + "[" * 50000 + "]" * 50000 + f', "traceEvents": [{EVENT}]}}',
     "JSON nested 50001 levels deep in its first 64 KB, before any traceEvents"),     # the object, then 50000
])
def test_unclear_json_gets_a_message_naming_it(fresh_db, tmp_path, text, words):
    p = tmp_path / "t.json"
    p.write_text(text)
    with pytest.raises(IngestError) as e:
        ingest_file(fresh_db, p)
    assert str(e.value).startswith(f"{p}: ") and words in str(e.value), str(e.value)
    assert fresh_db.execute("SELECT count(*) FROM runs").fetchone() == (0,)


def test_the_same_json_without_the_duplicate_loads(fresh_db, tmp_path):
    p = tmp_path / "t.json"
    p.write_text(f'{{"distributedInfo": {{"rank": 1}}, "traceEvents": [{EVENT}], "deviceProperties": [{{"name": "H100"}}]}}')
    r = ingest_file(fresh_db, p)
    assert fresh_db.execute("SELECT rank, n_events FROM runs WHERE run = ?", [r.run]).fetchone() == (1, 1)


def test_spark_on_a_lake_of_cpu_only_traces_gives_duckdbs_rows(spark, tmp_path, capsys):
    """A lake of CPU-only traces has no kernels dataset: Spark reads the tables it lacks
    as empty ones (it failed with an AnalysisException traceback), so a report gives
    the rows DuckDB gives on the database."""
    from tracedb.query import engines, reports
    from tracedb.store import db
    dbf, lk = tmp_path / "x.duckdb", tmp_path / "lake"
    assert main(["ingest", str(DATA / "tf" / "cpu_sync_lenet_bs64.json.gz"), "--db", str(dbf)]) == 0
    assert main(["export", "--db", str(dbf), "--lake", str(lk)]) == 0
    assert not (lk / "kernels").exists()
    con = db.connect(dbf, read_only=True)
    want = reports.run(con, "overview", {}).to_pylist()
    con.close()
    got = engines.run_spark("overview", {}, lk).to_pylist()
    assert len(got) == len(want) == 1 and got[0]["kernels"] == want[0]["kernels"] == 0
    assert {k: v for k, v in got[0].items() if k != "ingested_at"} == \
        {k: v for k, v in want[0].items() if k != "ingested_at"}