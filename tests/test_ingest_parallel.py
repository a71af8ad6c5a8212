"""Many traces in worker processes: the same database as ingesting them one by one."""
from conftest import TRACES, run_name
from test_trace_pieces import TABLES, tables
from tracedb.store import db
from tracedb.ingest import ingest_file
from tracedb.ingest.parallel import ingest_traces


def test_parallel_ingest_equals_serial(tmp_path):
    files = TRACES[:4]
    serial = db.connect(tmp_path / "serial.duckdb")
    for p in files:
        ingest_file(serial, p)
    par = db.connect(tmp_path / "par.duckdb")
    got = []
    assert ingest_traces(par, files, jobs=2, report=got.append) == 0
    assert sorted(r.run for r in got) == sorted(run_name(p) for p in files)
    for p in files:
        assert tables(par, run_name(p)) == tables(serial, run_name(p)), p
    key = "SELECT run, kind, content_hash, content_bytes, n_events, base_time_ns FROM runs ORDER BY run"
    assert par.execute(key).fetchall() == serial.execute(key).fetchall()
    # the same files again: skipped, nothing duplicated; a bad file: reported, nothing left
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "ts": 1}, oops]}')
    again = []
    assert ingest_traces(par, files[:2] + [bad], jobs=2, report=again.append) == 1
    assert sorted(r.status for r in again if not isinstance(r, tuple)) == ["skipped", "skipped"]
    assert [e for e in again if isinstance(e, tuple)][0][0] == str(bad)
    assert par.execute("SELECT count(*) FROM runs").fetchone()[0] == len(files)
