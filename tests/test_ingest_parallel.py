"""Many traces at once, each on a thread and a cursor of its own: the same database as
ingesting them one by one."""
import gzip
import json
import threading
import warnings

import pytest

from conftest import TRACES, run_name
from test_trace_pieces import TABLES, tables
from tracedb.store import db
from tracedb.store.catalog import run_column_of, table_run_columns
from tracedb.ingest import caught, ingest_file, parallel, trace, trace_json
from tracedb.ingest.parallel import ingest_traces


def same_rows_in_every_table(par, serial, runs):
    """Every table's rows of each run (par's name -> serial's), every column but when
    it happened (*_at), and the runs rows."""
    for table, named in table_run_columns(serial).items():
        col = run_column_of(named)
        if col is None:
            continue
        cols = ", ".join(f'"{c}"' for (c,) in serial.execute(
            "SELECT column_name FROM duckdb_columns() WHERE table_name = ? AND column_name NOT LIKE '%\\_at' "
            "ESCAPE '\\' AND column_name <> ?", [table, col]).fetchall())
        q = f'SELECT {cols} FROM {table} WHERE "{col}" = ? ORDER BY ALL'
        for mine, theirs in runs.items():
            assert par.execute(q, [mine]).fetchall() == serial.execute(q, [theirs]).fetchall(), (table, mine)


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
    # every table's rows of each run, every column (each a table of the schema, not a list)
    same_rows_in_every_table(par, serial, {run_name(p): run_name(p) for p in files})
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
    """Files loaded into the target at once, each its own transaction: a file and a
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
    # a's name claimed twice: the claim made second (whichever thread got there later)
    # gets name~2; where the twin landed, b's run has a's name, or name~2 when a still
    # held the name as b's load began (a's skip gives it back, for the loads after it)
    if a_run[0] == "twin":
        assert b_run in (run_name(a), run_name(a) + "~2")
    else:
        assert sorted([a_run[0], b_run]) == [run_name(a), run_name(a) + "~2"]
    serial = db.connect(tmp_path / "serial.duckdb")
    for p in (a, b):
        ingest_file(serial, p)
        h = serial.execute("SELECT content_hash FROM runs WHERE run = ?", [run_name(p)]).fetchone()[0]
        assert tables(par, {h: r for r, h in runs.items()}[h]) == tables(serial, run_name(p)), p


def test_a_name_claimed_in_one_database_is_free_in_another(tmp_path):
    """The names of ingests under way are claimed per database file: an ingest into
    another file of the same process keeps its own name (it got name~2), while a
    second ingest into the same file still gets name~2."""
    from tracedb.ingest import _claims
    a = db.connect(tmp_path / "a.duckdb")
    with _claims(a) as claim:
        assert claim("x") == "x"                       # an ingest into a.duckdb under way
        b = db.connect(tmp_path / "b.duckdb")
        assert ingest_file(b, TRACES[0], run="x").run == "x"
        assert ingest_file(a.cursor(), TRACES[0], run="x").run == "x~2"


def plain_copy(path, to):
    """An uncompressed copy of a gzip fixture."""
    with gzip.open(path, "rb") as f:
        to.write_bytes(f.read())
    return to


def test_files_at_once_load_as_one_by_one_without_a_small_first_batch(tmp_path, monkeypatch):
    """Beside other files an uncompressed trace is cut without the small first batch a
    file alone gets (its parse is overlapped by the other files' work): the same rows."""
    monkeypatch.setattr(trace_json, "PIECE_BYTES", 128 << 10)
    monkeypatch.setattr(trace_json, "TAIL", 16 << 10)
    monkeypatch.setattr(trace, "BATCH_BYTES", 1)            # a batch per DuckDB thread's piece
    monkeypatch.setattr(trace, "FIRST_BATCH_BYTES", 256 << 10)
    firsts = []
    split = trace_json.split
    monkeypatch.setattr(trace_json, "split", lambda *a, **k: (firsts.append(k.get("first")), split(*a, **k))[1])
    files = [plain_copy(p, tmp_path / (run_name(p) + ".json")) for p in TRACES[:2]]
    serial = db.connect(tmp_path / "serial.duckdb")
    for p in files:
        ingest_file(serial, p)
    alone, firsts[:] = list(firsts), []
    par = db.connect(tmp_path / "par.duckdb")
    assert ingest_traces(par, files, jobs=2, report=lambda r: None) == 0
    assert all(f[1] > 0 for f in alone) and firsts == [(0, 0), (0, 0)]      # the two paths were taken
    same_rows_in_every_table(par, serial, {run_name(p): run_name(p) for p in TRACES[:2]})
    q = "SELECT * EXCLUDE (ingested_at) FROM runs ORDER BY run"
    assert par.execute(q).fetchall() == serial.execute(q).fetchall()


def test_warnings_stay_with_their_file_when_files_load_at_once(tmp_path):
    """Two files, each with its own warning, loaded at once: each result, each run's
    ingest log and the caller get the warnings a one-by-one ingest gives, no more.
    One comes from the ingest's own thread (a negative duration), the other from the
    thread that inflates a gzip (a gzip without its trailer); warnings.catch_warnings,
    one per ingest, is not safe across threads."""
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(TRACES[0].read_bytes()[:-8])
    doc = json.load(gzip.open(TRACES[1]))
    next(e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("dur"))["dur"] = -5
    neg = tmp_path / "neg.json"
    neg.write_text(json.dumps(doc))
    files = [cut, neg]

    def load(how):
        with warnings.catch_warnings(record=True) as shown:
            warnings.simplefilter("always")
            results = how()
        return ({r.path: r.warnings for r in results}, sorted(str(w.message) for w in shown))
    serial = db.connect(tmp_path / "serial.duckdb")
    one_by_one = load(lambda: [ingest_file(serial, p) for p in files])
    par = db.connect(tmp_path / "par.duckdb")
    got = []
    filters, show = warnings.filters, warnings.showwarning
    at_once = load(lambda: (ingest_traces(par, files, jobs=2, report=got.append), got)[1])
    assert at_once == one_by_one
    assert ["complete; loaded as it is" in m for ms in one_by_one[0].values() for m in ms] == [True, False]
    assert warnings.filters is filters and warnings.showwarning is show
    same_rows_in_every_table(par, serial, {"cut": "cut", "neg": "neg"})         # ingest_log among them


def test_caught_gives_each_warning_to_its_ingest():
    """Ingest a and b catch at once on two threads, and a ends first: each warning goes
    to the ingest of its thread, else to the one whose file it names, else on to the
    caller; the warnings module is as it was after."""
    got, a_in, b_in, a_out = {}, threading.Event(), threading.Event(), threading.Event()

    def warn_on_a_thread(text):
        t = threading.Thread(target=warnings.warn, args=(text,))
        t.start()
        t.join()

    def a():
        with caught.caught("/x/a.json") as log:
            a_in.set()
            b_in.wait()
            warnings.warn("/x/a.json: from a")
            warn_on_a_thread("/x/b.json: about b, from a thread of a's")
        got["a"] = log
        a_out.set()

    def b():
        a_in.wait()
        with caught.caught("/x/b.json") as log:
            b_in.set()
            a_out.wait()                 # a has ended, b still catches
            warnings.warn("/x/b.json: from b")
            warn_on_a_thread("about no file")
        got["b"] = log
    with warnings.catch_warnings(record=True) as outer:
        warnings.simplefilter("always")
        filters, impl = warnings.filters, warnings._showwarnmsg_impl
        threads = [threading.Thread(target=f) for f in (a, b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert warnings.filters is filters and warnings._showwarnmsg_impl is impl
        warnings.warn("after")
    assert [str(w.message) for w in got["a"]] == ["/x/a.json: from a"]
    assert [str(w.message) for w in got["b"]] == ["/x/b.json: about b, from a thread of a's", "/x/b.json: from b"]
    assert [str(w.message) for w in outer] == ["about no file", "after"]


def test_a_warning_no_ingest_catches_keeps_the_callers_filters():
    """While an ingest catches, a warning of an unrelated thread goes on through the
    caller's own filters: one the caller ignores stays ignored, the rest are shown."""
    def warn_on_a_thread(text, category):
        t = threading.Thread(target=warnings.warn, args=(text, category))
        t.start()
        t.join()
    with warnings.catch_warnings(record=True) as outer:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("ignore", message="hush")
        with caught.caught("/x/a.json") as log:
            warn_on_a_thread("old", DeprecationWarning)
            warn_on_a_thread("hush, please", UserWarning)
            warn_on_a_thread("shown", UserWarning)
    assert log == []
    assert [str(w.message) for w in outer] == ["shown"]


def test_an_interrupted_folder_leaves_whole_runs_only(tmp_path):
    """Ctrl-C (here in the caller's report of the first file landed) stops the files
    under way: each rolls back, so the database holds whole runs only, and the same
    call again loads the rest as one by one."""
    files = TRACES[:4]
    par = db.connect(tmp_path / "par.duckdb")

    def stop(r):
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        ingest_traces(par, files, jobs=4, report=stop)
    landed = {r for (r,) in par.execute("SELECT run FROM runs").fetchall()}
    assert 1 <= len(landed) < len(files)
    for table, named in table_run_columns(par).items():
        if (col := run_column_of(named)) is not None:
            assert {r for (r,) in par.execute(f'SELECT DISTINCT "{col}" FROM {table}').fetchall()} <= landed, table
    got = []
    assert ingest_traces(par, files, jobs=4, report=got.append) == 0
    assert sorted(r.status for r in got) == sorted(["skipped"] * len(landed) + ["loaded"] * (len(files) - len(landed)))
    serial = db.connect(tmp_path / "serial.duckdb")
    for p in files:
        ingest_file(serial, p)
    # (the runs that landed before the interrupt have a line more in their log: skipped)
    same_rows_in_every_table(par, serial, {run_name(p): run_name(p) for p in files if run_name(p) not in landed})
    for r in landed:
        assert tables(par, r) == tables(serial, r), r


def test_ctrl_c_again_while_stopping_still_stops_cleanly(tmp_path):
    """Ctrl-C pressed again and again while the files under way are being stopped (a
    SIGINT every 10 ms for half a second, from the first file landed): the stop is not
    cut short (threads left inside DuckDB aborted the interpreter, or the next use of
    the connection found it busy), whole runs only, and the same call loads the rest."""
    import _thread
    import time
    files = TRACES[:4]
    par = db.connect(tmp_path / "par.duckdb")
    first, done = threading.Event(), threading.Event()

    def keep_pressing():
        first.wait()
        end = time.monotonic() + 0.5
        while time.monotonic() < end and not done.is_set():
            _thread.interrupt_main()
            time.sleep(0.01)
    presser = threading.Thread(target=keep_pressing)
    presser.start()

    def stop(r):
        first.set()
        raise KeyboardInterrupt
    raised = None
    try:
        ingest_traces(par, files, jobs=4, report=stop)
    except BaseException as e:
        raised = e
    done.set()
    while presser.is_alive():
        try:
            presser.join()
        except KeyboardInterrupt:
            pass
    try:
        time.sleep(0.05)               # (a SIGINT still pending lands here)
    except KeyboardInterrupt:
        pass
    # (or DuckDB's "Query interrupted", where a SIGINT met a statement of the settings'
    # reset: the CLI says both as `tracedb: interrupted`, exit 130)
    assert isinstance(raised, KeyboardInterrupt) or "interrupted" in str(raised).lower(), raised
    landed = {r for (r,) in par.execute("SELECT run FROM runs").fetchall()}
    for table, named in table_run_columns(par).items():
        if (col := run_column_of(named)) is not None:
            assert {r for (r,) in par.execute(f'SELECT DISTINCT "{col}" FROM {table}').fetchall()} <= landed, table
    got = []
    assert ingest_traces(par, files, jobs=4, report=got.append) == 0
    assert sorted(r.status for r in got) == sorted(["skipped"] * len(landed) + ["loaded"] * (len(files) - len(landed)))


def test_a_file_out_of_memory_beside_others_is_loaded_again_alone(tmp_path, monkeypatch):
    """DuckDB's memory cap is the database's, shared by the files at work: a file that
    ran out of it beside others (here: its first ingest made to fail so, as DuckDB says
    it) is loaded again alone once the others are done, reported once, as one by one."""
    files = TRACES[:3]
    victim = str(files[1])
    one, seen = parallel._one, []

    def first_out_of_memory(con, path, options, staging):
        seen.append(path)
        if path == victim and seen.count(path) == 1:
            return (path, f"{path}: Out of Memory Error: failed to allocate data of size 31.9 MiB "
                          "(212.6 MiB/240.0 MiB used)"), 0
        return one(con, path, options, staging)
    monkeypatch.setattr(parallel, "_one", first_out_of_memory)
    par = db.connect(tmp_path / "par.duckdb")
    got = []
    assert ingest_traces(par, files, jobs=3, report=got.append) == 0
    assert [r.status for r in got] == ["loaded"] * 3
    assert str(got[-1].path) == victim and seen.count(victim) == 2 and seen[-1] == victim
    serial = db.connect(tmp_path / "serial.duckdb")
    for p in files:
        ingest_file(serial, p)
    same_rows_in_every_table(par, serial, {run_name(p): run_name(p) for p in files})
    # alone, a file that runs out of memory again is an error like any other
    monkeypatch.setattr(parallel, "_one", lambda con, path, options, staging: (
        (path, f"{path}: Out of Memory Error: x"), 0) if path == victim else one(con, path, options, staging))
    got = []
    assert ingest_traces(db.connect(tmp_path / "again.duckdb"), files, jobs=3, report=got.append) == 1
    assert [g for g in got if isinstance(g, tuple)] == [(victim, f"{victim}: Out of Memory Error: x")]


def test_files_stage_their_events_within_the_budget(tmp_path, monkeypatch):
    """Files at once parse and insert their events (the Arrow they hold) no more than
    STAGED_BYTES of content together; an Nsight Systems export, which stages no Arrow
    batches, loads alone; the rows are one by one's."""
    from conftest import DATA
    nsys = DATA / "nsys" / "healthy_1pct.sqlite.gz"
    files = [TRACES[0], nsys, TRACES[3], TRACES[2]]
    monkeypatch.setattr(parallel, "STAGED_BYTES", parallel._content_bytes(TRACES[0]) + parallel._content_bytes(TRACES[3]))
    seen, enter = [], parallel._Held.__enter__

    def spy(self):
        enter(self)
        with self.staging.turn:
            seen.append((self.nbytes, self.staging.held))
    monkeypatch.setattr(parallel._Held, "__enter__", spy)
    par = db.connect(tmp_path / "par.duckdb")
    got = []
    assert ingest_traces(par, files, jobs=4, report=got.append) == 0, got
    budget = parallel.STAGED_BYTES
    assert len(seen) == len(files) and all(held <= budget for _, held in seen)
    assert (budget, budget) in seen                      # the export, alone
    assert sorted(n for n, _ in seen) == sorted([budget] + [parallel._content_bytes(p) for p in files if p != nsys])
    serial = db.connect(tmp_path / "serial.duckdb")
    for p in files:
        ingest_file(serial, p)
    runs = [r for (r,) in serial.execute("SELECT run FROM runs ORDER BY run").fetchall()]
    assert sorted(r.run for r in got) == runs
    same_rows_in_every_table(par, serial, {r: r for r in runs})
