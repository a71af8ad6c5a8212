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
    # every table's rows of each run, every column (the workers hand them over as Arrow)
    from tracedb.store.catalog import run_column_of, table_run_columns
    for table, named in table_run_columns(serial).items():
        col = run_column_of(named)
        if col is None:
            continue
        cols = ", ".join(f'"{c}"' for (c,) in serial.execute(      # all but when it happened (*_at)
            "SELECT column_name FROM duckdb_columns() WHERE table_name = ? AND column_name NOT LIKE '%\\_at' "
            "ESCAPE '\\'", [table]).fetchall())
        q = f'SELECT {cols} FROM {table} WHERE "{col}" = ? ORDER BY ALL'
        for p in files:
            assert par.execute(q, [run_name(p)]).fetchall() == serial.execute(q, [run_name(p)]).fetchall(), (table, p)
    q = "SELECT * EXCLUDE (ingested_at) FROM runs ORDER BY run"
    assert par.execute(q).fetchall() == serial.execute(q).fetchall()
    # the same files again: skipped, nothing duplicated; a bad file: reported, nothing left
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "ts": 1}, oops]}')
    again = []
    assert ingest_traces(par, files[:2] + [bad], jobs=2, report=again.append) == 1
    assert sorted(r.status for r in again if not isinstance(r, tuple)) == ["skipped", "skipped"]
    assert [e for e in again if isinstance(e, tuple)][0][0] == str(bad)
    assert par.execute("SELECT count(*) FROM runs").fetchone()[0] == len(files)


def test_copies_at_once_keep_duplicates_and_names_apart(tmp_path):
    """Runs copied into the target at once, each its own transaction: a file and a
    copy of it under another name in one call land once (the other skipped as its
    duplicate), and two files of one name and other content get two names, as one
    by one: the same rows."""
    import shutil
    a, b = TRACES[0], TRACES[1]
    (tmp_path / "x").mkdir()
    (tmp_path / "y").mkdir()
    twin = tmp_path / "x" / "twin.json.gz"
    shutil.copy(a, twin)
    same_name = tmp_path / "y" / a.name          # b's content under a's name
    shutil.copy(b, same_name)
    par = db.connect(tmp_path / "par.duckdb")
    got = []
    assert ingest_traces(par, [a, twin, same_name], jobs=3, report=got.append) == 0, \
        [g for g in got if isinstance(g, tuple)]
    assert sorted(r.status for r in got) == ["loaded", "loaded", "skipped"]
    a_run = [r.run for r in got if r.path in (str(a), str(twin)) and r.status == "loaded"]
    assert len(a_run) == 1        # a or its twin, whichever landed first; the other skipped as its duplicate
    assert [r.message for r in got if r.status == "skipped"] == [f"already ingested as run {a_run[0]}"]
    b_run = [r.run for r in got if r.path == str(same_name)][0]
    runs = dict(par.execute("SELECT run, content_hash FROM runs").fetchall())
    assert sorted(runs) == sorted([a_run[0], b_run])
    # a's name claimed twice: the claim made second (whichever worker finished later)
    # gets name~2; where the twin landed, b's copy has a's name, or name~2 when a still
    # held the name as b's copy began (a's refusal gives it back, for the copies after it)
    if a_run[0] == "twin":
        assert b_run in (run_name(a), run_name(a) + "~2")
    else:
        assert sorted([a_run[0], b_run]) == [run_name(a), run_name(a) + "~2"]
    serial = db.connect(tmp_path / "serial.duckdb")
    for p in (a, b):
        ingest_file(serial, p)
        h = serial.execute("SELECT content_hash FROM runs WHERE run = ?", [run_name(p)]).fetchone()[0]
        assert tables(par, {h: r for r, h in runs.items()}[h]) == tables(serial, run_name(p)), p
