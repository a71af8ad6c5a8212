"""Traces read in pieces (ingest/trace_json.split cuts the event array; DuckDB reads
the pieces one thread each): every fixture loads exactly as it does whole, through
the gzip and the plain-file paths; a cut that falls inside an event falls back to
the whole array; a malformed piece is still a clear error; the memory cap is undone."""
import functools
import gzip
import hashlib
import json
import re
import shutil
import subprocess
import sys
import threading
import weakref

import duckdb
import pytest

from conftest import TRACES, run_name
from tracedb.store import db
from tracedb.store.sql import scalar, statements
from tracedb.ingest import IngestError, ingest_file, trace, trace_json

TABLES = {
    "events": "SELECT * EXCLUDE (run) FROM events WHERE run = ? ORDER BY event_id",
    "kernels": "SELECT * EXCLUDE (run) FROM kernels WHERE run = ? ORDER BY kernel_id",
    "iterations": "SELECT * EXCLUDE (run) FROM iterations WHERE run = ? ORDER BY iteration",
    "threads": "SELECT * EXCLUDE (run) FROM threads WHERE run = ? ORDER BY ALL",
}


def tables(con, run):
    return {t: con.execute(q, [run]).fetchall() for t, q in TABLES.items()}


@pytest.fixture
def small_pieces(monkeypatch):
    """Pieces of 128 KB and a 16 KB tail, so that the small fixtures are cut too."""
    monkeypatch.setattr(trace_json, "PIECE_BYTES", 128 << 10)
    monkeypatch.setattr(trace_json, "TAIL", 16 << 10)


def pieces_of(path, tmp_path):
    d = tmp_path / "split"
    d.mkdir(exist_ok=True)
    tf = trace_json.split(path, str(d), hashlib.sha256())
    tf.wait_hash()
    return tf


@pytest.fixture(params=["one batch", "a batch per piece"])
def batches(request, monkeypatch):
    """Pieces staged all at once (a trace up to trace.BATCH_BYTES), or one batch per
    piece (a large trace: memory bounded, the derivation reads the events table)."""
    if request.param != "one batch":
        monkeypatch.setattr(trace, "BATCH_BYTES", 1)
        monkeypatch.setattr(trace, "BATCH_ROWS", 1000)
    return request.param


@pytest.mark.parametrize("path", TRACES, ids=run_name)
def test_fixture_in_pieces_loads_as_it_does_whole(fixture_db, small_pieces, batches, tmp_path, path):
    assert len(pieces_of(path, tmp_path).pieces) >= 3
    con = db.connect(tmp_path / "p.duckdb")
    ingest_file(con, path)
    name = run_name(path)
    got, whole = tables(con, name), tables(fixture_db, name)
    assert len(got["events"]) == len(whole["events"]) > 0
    for t in TABLES:
        assert got[t] == whole[t], t
    con.close()


def test_plain_file_in_pieces(fixture_db, small_pieces, batches, tmp_path, monkeypatch):
    """Uncompressed traces are cut while the kernel copies them (copy_file_range), or
    fed to DuckDB through named pipes (splice)."""
    path = TRACES[0]
    plain = tmp_path / (run_name(path) + ".json")
    with gzip.open(path, "rb") as f, open(plain, "wb") as out:
        shutil.copyfileobj(f, out)
    monkeypatch.setattr(trace, "FIRST_BATCH_BYTES", 0)     # pieces of one size (a small first batch: below)
    tf = pieces_of(plain, tmp_path)
    assert len(tf.pieces) >= 3
    # each piece is a whole JSON array of events; together they are the file's events
    events = [e for p in tf.pieces for e in json.load(open(p))]
    assert events == json.load(gzip.open(path))["traceEvents"]
    # loaded, each piece through a named pipe the kernel feeds from the file (no
    # piece file written), as the fixture loads whole; and again through piece
    # files where there are no pipes
    fed, feed = [], trace_json._Pipes._feed
    monkeypatch.setattr(trace_json._Pipes, "_feed", lambda self, pipe, *a: (fed.append(pipe), feed(self, pipe, *a)))
    threads = threading.active_count()
    for pipes in (True, False):
        monkeypatch.setattr(trace_json._Pipes, "usable", staticmethod(lambda: pipes))
        con = db.connect(tmp_path / f"p{pipes}.duckdb")
        ingest_file(con, plain)
        assert tables(con, run_name(path)) == tables(fixture_db, run_name(path))
        assert len(fed) == len(tf.pieces)
        con.close()
    assert threading.active_count() == threads


def test_a_ts_that_is_not_a_number_reads_the_numbers_as_text(fixture_db, small_pieces, batches, tmp_path):
    """A real trace with one flow event's ts a string no number can be read from:
    DuckDB's reader rejects it as a double, the load starts again with ts and dur
    read as text, and everything else loads exactly as the fixture does."""
    path = TRACES[0]
    doc = json.load(gzip.open(path))
    k = next(i for i, e in enumerate(doc["traceEvents"]) if e.get("ph") == "s" and i > len(doc["traceEvents"]) // 2)
    doc["traceEvents"][k]["ts"] = "12:00:01"
    p = tmp_path / (run_name(path) + ".json")
    p.write_text(json.dumps(doc, indent=1))
    assert len(pieces_of(p, tmp_path).pieces) >= 3
    con = db.connect(tmp_path / "t.duckdb")
    with pytest.warns(UserWarning, match="1 events have a ts or dur that is not a number"):
        ingest_file(con, p)
    got, want = tables(con, run_name(path)), tables(fixture_db, run_name(path))
    assert [e[6] for e in got["events"] if e[0] == k] == [None]          # ts_ns
    assert [e for e in got["events"] if e[0] != k] == [e for e in want["events"] if e[0] != k]
    for t in ("kernels", "iterations", "threads"):
        assert got[t] == want[t], t
    con.close()


def test_gzip_loaded_while_inflated_as_when_inflated_first(fixture_db, small_pieces, batches, tmp_path):
    """A Kineto gzip gives its base time before the events: the load parses pieces
    while a thread inflates the rest. The same trace with the base time moved after
    the events is inflated whole first: both load exactly as the fixture does."""
    path = TRACES[0]
    doc = json.load(gzip.open(path))
    assert list(doc).index("baseTimeNanoseconds") < list(doc).index("traceEvents")
    late = {k: v for k, v in doc.items() if k != "baseTimeNanoseconds"}
    late["baseTimeNanoseconds"] = doc["baseTimeNanoseconds"]
    moved = tmp_path / (run_name(path) + ".json.gz")
    moved.write_bytes(gzip.compress(json.dumps(late, indent=1).encode()))
    tf = pieces_of(moved, tmp_path)
    assert tf.copier is None and len(tf.pieces) >= 3          # inflated whole by split()
    with open(path, "rb") as f:
        early = tmp_path / "early" / path.name
        early.parent.mkdir()
        early.write_bytes(f.read())
    tf = trace_json.split(early, str(tmp_path / "early"), hashlib.sha256())
    assert tf.copier is not None and tf.content_bytes is None  # inflated as it loads
    tf.stop()
    for src in (early, moved):
        con = db.connect(tmp_path / f"{src.parent.name}.duckdb")
        ingest_file(con, src)
        assert tables(con, run_name(path)) == tables(fixture_db, run_name(path)), src
        content = con.execute("SELECT content_bytes FROM runs").fetchone()[0]
        assert content == len(gzip.decompress(src.read_bytes()))
        con.close()


def test_gzip_hashed_while_loading_is_still_found_a_duplicate(tmp_path):
    """The hash of a gzip inflated while it loads is known only after the load: the
    same content (the same gzip, or its plain copy loaded before) is rolled back and
    reported skipped, as when the hash is known first."""
    import threading
    path = TRACES[0]
    con = db.connect(tmp_path / "d.duckdb")
    first = ingest_file(con, path)
    before = con.execute("SELECT count(*) FROM events").fetchone()[0]
    threads = threading.active_count()
    again = ingest_file(con, path)
    assert again.status == "skipped" and again.run == first.run
    # named as the run it repeats: still the same content, not "already exists"
    assert ingest_file(con, path, run=first.run).status == "skipped"
    # a load that fails before its first piece leaves no thread behind (hashing, inflating)
    doc = json.load(gzip.open(path))
    bad = tmp_path / "bad_base.json.gz"
    bad.write_bytes(gzip.compress(json.dumps(dict(doc, baseTimeNanoseconds="soon")).encode()))
    with pytest.raises(IngestError, match="baseTimeNanoseconds is not an integer"):
        ingest_file(con, bad)
    assert threading.active_count() == threads
    plain = tmp_path / "plain.json"
    plain.write_bytes(gzip.decompress(path.read_bytes()))
    con2 = db.connect(tmp_path / "e.duckdb")
    ingest_file(con2, plain)
    assert ingest_file(con2, path).status == "skipped"
    for c, n in ((con, before), (con2, before)):
        assert c.execute("SELECT count(*) FROM events").fetchone()[0] == n
        assert c.execute("SELECT count(*) FROM runs").fetchone()[0] == 1
        c.close()


def rejected_as_malformed(con, path):
    """Loading path fails with a clear error naming it, loads nothing, and leaves no
    thread behind (the feeders of pipes DuckDB never opened or left, the inflate)."""
    threads = threading.active_count()
    with pytest.raises(IngestError, match="malformed") as e:
        ingest_file(con, path)
    assert str(path) in str(e.value)
    assert threading.active_count() == threads
    assert scalar(con, "SELECT count(*) FROM events") == scalar(con, "SELECT count(*) FROM runs") == 0


def late_event_trace(tmp_path, ts_text):
    """TRACES[0] as a gzip whose flow event past the middle has ts written as ts_text
    (JSON text); the event's index."""
    doc = json.load(gzip.open(TRACES[0]))
    k = next(i for i, e in enumerate(doc["traceEvents"]) if e.get("ph") == "s" and i > len(doc["traceEvents"]) // 2)
    doc["traceEvents"][k]["ts"] = "@late@"
    p = tmp_path / (run_name(TRACES[0]) + ".json.gz")
    p.write_bytes(gzip.compress(json.dumps(doc, indent=1).replace('"@late@"', ts_text).encode()))
    return p, k, doc


def held_in_memory(monkeypatch):
    """A list of the number of pieces held as each piece held in memory is made."""
    held, real = [], trace_json._MemoryPieces.create

    def create(self, k, stopped):
        made = real(self, k, stopped)
        if made is not None:
            held.append(len(self.fds))
        return made
    monkeypatch.setattr(trace_json._MemoryPieces, "create", create)
    return held


needs_memfd = pytest.mark.skipif(not trace_json._MemoryPieces.usable(), reason="no memfd (Linux only)")


@needs_memfd
def test_gzip_pieces_held_in_memory_a_few_at_a_time(fixture_db, small_pieces, tmp_path, monkeypatch):
    """A Kineto gzip inflated while it loads keeps its pieces in memory, at most
    a batch's and trace.PIECES_AHEAD more at once: each batch's pieces are let go once parsed, and the
    inflate waits for that room (so it never holds the whole trace); none is left."""
    monkeypatch.setattr(trace, "BATCH_BYTES", 1)          # a batch per piece
    monkeypatch.setattr(trace, "PIECES_AHEAD", 0)          # one piece held: the one being parsed
    held = held_in_memory(monkeypatch)
    prepared, real_prepare = [], trace.TraceReader.prepare

    def prepare(self, *a, **k):
        prepared.append(real_prepare(self, *a, **k))
        return prepared[-1]
    monkeypatch.setattr(trace.TraceReader, "prepare", prepare)
    con = db.connect(tmp_path / "m.duckdb")
    con.execute("SET threads = 1")                         # a batch is a piece per thread
    load = threading.Thread(target=ingest_file, args=(con, TRACES[0]), daemon=True)
    load.start()
    load.join(timeout=120)
    assert not load.is_alive(), "the inflate and the load wait for each other"
    assert len(held) >= 10 and max(held) == 1          # ten pieces made, never more than one held
    assert prepared[0].state.memory.fds == {}            # every one let go
    assert tables(con, run_name(TRACES[0])) == tables(fixture_db, run_name(TRACES[0]))
    con.close()


@needs_memfd
@pytest.mark.parametrize("ts_text, why", [('"12:00:01"', "a string"), ("1700000000123456.789", "epoch ns")],
                         ids=["a string ts: read as text", "epoch µs with ns: read exactly"])
def test_gzip_read_again_after_its_pieces_were_let_go(fixture_db, small_pieces, tmp_path, monkeypatch, ts_text, why):
    """An event late in a gzip inflated while it loads needs another way of reading
    once earlier pieces were let go: the trace is inflated again, into piece files,
    and read that way: it loads as the fixture does but for that event's ts."""
    monkeypatch.setattr(trace, "BATCH_BYTES", 1)
    monkeypatch.setattr(trace, "BATCH_ROWS", 1000)
    p, k, doc = late_event_trace(tmp_path, ts_text)
    held = held_in_memory(monkeypatch)
    reloads, real_reload = [], trace.TraceReader.reload

    def reload(self, prep, work):
        reloads.append(prep.state.memory is not None and prep.state.memory.let_go)
        return real_reload(self, prep, work)
    monkeypatch.setattr(trace.TraceReader, "reload", reload)
    con = db.connect(tmp_path / "r.duckdb")
    if why == "a string":
        with pytest.warns(UserWarning, match="1 events have a ts or dur that is not a number"):
            r = ingest_file(con, p)
        want_ns = None
    else:
        r = ingest_file(con, p)
        want_ns = doc["baseTimeNanoseconds"] + 1700000000123456789
    assert len(held) > 3 and reloads[0] is True          # pieces were let go before the reload
    got, want = tables(con, r.run), tables(fixture_db, run_name(TRACES[0]))
    assert [e[6] for e in got["events"] if e[0] == k] == [want_ns]          # ts_ns
    assert [e for e in got["events"] if e[0] != k] == [e for e in want["events"] if e[0] != k]
    for t in ("kernels", "iterations", "threads"):
        assert got[t] == want[t], t
    assert scalar(con, "SELECT content_hash FROM runs") == hashlib.sha256(gzip.decompress(p.read_bytes())).hexdigest()
    con.close()


@needs_memfd
def test_malformed_gzip_late_in_memory_is_a_clear_error(small_pieces, tmp_path, monkeypatch):
    """A gzip whose event past the middle is not JSON, found after earlier pieces held
    in memory were let go: the same clear error as for a file, nothing loaded, no
    thread left behind."""
    monkeypatch.setattr(trace, "BATCH_BYTES", 1)
    p, _, _ = late_event_trace(tmp_path, "12:00:01")
    con = db.connect(tmp_path / "b.duckdb")
    rejected_as_malformed(con, p)
    con.close()


def nested_trace(path, n=400):
    """A small trace whose events carry arrays of objects in their args: `},{`
    inside an event, where a cut would break it."""
    events = [{"ph": "X", "cat": "cpu_op", "name": f"op{i}", "pid": 1, "tid": 1, "ts": 1000 + 10 * i,
               "dur": 5, "args": {"inputs": [{"shape": [i, 2]}, {"shape": [3, i]}] * 20}} for i in range(n)]
    path.write_text(json.dumps({"traceEvents": events, "traceName": "nested"}, indent=1))
    return events


@needs_memfd
def test_gzip_in_memory_cut_inside_an_event_and_a_string_ts(tmp_path, monkeypatch):
    """A gzip held in memory that needs every other way of reading: from piece files,
    the pieces joined (a cut fell inside an event), then its numbers as text (a late
    string ts). Four loads in all: the last one loads every event."""
    monkeypatch.setattr(trace_json, "PIECE_BYTES", 4 << 10)
    monkeypatch.setattr(trace_json, "TAIL", 1 << 10)
    monkeypatch.setattr(trace, "BATCH_BYTES", 1)
    src = tmp_path / "nested.json"
    events = nested_trace(src)
    events[350]["ts"] = "12:00:01"
    p = tmp_path / "nested.json.gz"
    p.write_bytes(gzip.compress(json.dumps({"baseTimeNanoseconds": 1000, "traceEvents": events}, indent=1).encode()))
    con = db.connect(tmp_path / "n.duckdb")
    with pytest.warns(UserWarning, match="1 events have a ts or dur that is not a number"):
        r = ingest_file(con, p)
    rows = con.execute("SELECT event_id, name, ts_ns FROM events WHERE run = ? ORDER BY event_id", [r.run]).fetchall()
    assert [(i, e["name"], None if i == 350 else 1000 + e["ts"] * 1000) for i, e in enumerate(events)] == rows
    con.close()


@needs_memfd
def test_gzip_in_memory_waiting_for_its_hash_alone_holds_no_pieces(tmp_path, monkeypatch):
    """--run naming a run that exists: only the content's hash is waited for (is it the
    same content?), so the pieces inflated meanwhile are let go as they come instead of
    held (a 10 GB gzip would have held 10 GB)."""
    monkeypatch.setattr(trace_json, "PIECE_BYTES", 128 << 10)
    monkeypatch.setattr(trace_json, "TAIL", 16 << 10)
    monkeypatch.setattr(trace, "BATCH_BYTES", 1)
    con = db.connect(tmp_path / "h.duckdb")
    ingest_file(con, TRACES[0], run="r")
    held = held_in_memory(monkeypatch)
    with pytest.raises(IngestError, match="already exists with other content"):
        ingest_file(con, TRACES[1], run="r")
    assert len(held) >= 5 and max(held) <= 2
    con.close()


@needs_memfd
def test_gzip_in_memory_whose_pieces_cannot_be_written_is_one_error(tmp_path):
    """ulimit -f below a piece's size: writing a piece held in memory fails (EFBIG).
    The inflate stops instead of waiting for room that the load, waiting for that
    piece, never leaves: the ingest ends with the error in a few seconds."""
    script = (
        "import resource, sys\n"
        "from tracedb.store import db\n"
        "from tracedb.ingest import IngestError, ingest_file, trace, trace_json\n"
        "trace_json.PIECE_BYTES, trace_json.TAIL = 128 << 10, 16 << 10\n"
        "trace.BATCH_BYTES = 4 * trace_json.PIECE_BYTES\n"
        "con = db.connect(sys.argv[2])\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (64 << 10, 64 << 10))\n"
        "try:\n    ingest_file(con, sys.argv[1])\n"
        "except IngestError as e:\n    print('error:', e)\n")
    r = subprocess.run([sys.executable, "-c", script, str(TRACES[0]), str(tmp_path / "f.duckdb")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"error: {TRACES[0]}: ") and "ulimit -f" in r.stdout, r.stdout


def test_cut_inside_an_event_loads_the_whole_array(tmp_path, monkeypatch):
    src = tmp_path / "nested.json"
    events = nested_trace(src)
    monkeypatch.setattr(trace_json, "PIECE_BYTES", 4 << 10)
    monkeypatch.setattr(trace_json, "TAIL", 1 << 10)
    tf = pieces_of(src, tmp_path)
    bad = 0
    for p in tf.pieces:
        try:
            json.load(open(p))
        except json.JSONDecodeError:
            bad += 1
    assert len(tf.pieces) > 10 and bad > 0          # some cuts fell inside an event
    con = db.connect(tmp_path / "n.duckdb")
    r = ingest_file(con, src)
    assert r.status == "loaded"
    rows = con.execute("SELECT event_id, name, args FROM events WHERE run = 'nested' ORDER BY event_id").fetchall()
    assert [(i, e["name"], e["args"]) for i, e in enumerate(events)] == [(a, b, json.loads(c)) for a, b, c in rows]
    con.close()


def test_malformed_trace_in_pieces_is_a_clear_error(tmp_path, monkeypatch):
    src = tmp_path / "broken.json"
    nested_trace(src, n=200)
    text = src.read_text()
    mid = text.index('"name": "op100"')
    src.write_text(text[:mid] + '"name": nonsense' + text[mid + len('"name": "op100"'):])
    monkeypatch.setattr(trace_json, "PIECE_BYTES", 4 << 10)
    monkeypatch.setattr(trace_json, "TAIL", 1 << 10)
    con = db.connect(tmp_path / "b.duckdb")
    rejected_as_malformed(con, src)
    con.close()


def setting(con, name):
    return con.execute(f"SELECT current_setting('{name}')").fetchone()[0]


def setting_while_loading(monkeypatch, name):
    """The list of the DuckDB setting's values each trace load ran under (trace.load spied)."""
    seen, real = [], trace.load

    def spy(con_, tf, run):
        seen.append(setting(con_, name))
        return real(con_, tf, run)
    monkeypatch.setattr(trace, "load", spy)
    return seen


def test_memory_cap_while_loading_and_lifted_after(tmp_path, monkeypatch):
    con = db.connect(tmp_path / "m.duckdb")
    default = setting(con, "memory_limit")
    seen = setting_while_loading(monkeypatch, "memory_limit")
    ingest_file(con, TRACES[0])
    assert seen == ["896.0 MiB"] != [default]       # capped while loading (the trace is smaller)
    assert setting(con, "memory_limit") == default
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "ts": 1, "dur": 2}, nonsense]}')
    with pytest.raises(IngestError):
        ingest_file(con, bad)
    assert setting(con, "memory_limit") == default
    # a limit the user set is theirs: left as it is
    con.execute("SET memory_limit = '3GB'")
    mine = setting(con, "memory_limit")
    ingest_file(con, TRACES[1])
    assert seen[-1] == mine and setting(con, "memory_limit") == mine
    con.close()


def test_many_threads_parse_no_more_pieces_at_once_than_the_cap_holds(fixture_db, tmp_path, monkeypatch):
    """DuckDB's JSON reader counts ~42 MB of the memory cap for each piece it reads at
    once (a thread each), however small the piece: a batch of a piece per thread, on 32
    threads, ran out of a 1 GiB cap in its parse alone (1.34 GB). A batch holds at most
    PIECES_AT_ONCE pieces whatever the threads, and the trace loads as it does whole."""
    path = TRACES[0]
    monkeypatch.setattr(trace, "MIN_PIECE_BYTES", 64 << 10)     # the small fixture cut in many pieces
    monkeypatch.setattr(trace, "BATCH_BYTES", 4 << 20)
    groups, real = [], trace._batches

    def spy(pieces, per_batch):
        for g in real(pieces, per_batch):
            groups.append(len(g))
            yield g
    monkeypatch.setattr(trace, "_batches", spy)
    con = db.connect(tmp_path / "t32.duckdb")
    con.execute("SET threads = 32")
    ingest_file(con, path)
    assert trace._pieces_per_batch(32) == trace.PIECES_AT_ONCE == 12 < 32
    assert max(groups) == trace.PIECES_AT_ONCE and len(groups) >= 2    # full batches of 12, not 32
    assert trace._pieces_per_batch(8) == 8                             # fewer threads: one a thread
    assert tables(con, run_name(path)) == tables(fixture_db, run_name(path))
    con.close()


def test_trim_heap_hands_freed_malloc_pages_back():
    """store/tuning.trim_heap: pages glibc's malloc keeps after a free (here 128 MB of
    64 KB blocks below one still held, so the heap's top cannot shrink) leave the
    process's RSS (the Arrow tables DuckDB hands over are malloc'ed)."""
    import ctypes
    from tracedb.store.tuning import trim_heap
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.malloc_trim
    except (OSError, AttributeError):
        pytest.skip("not glibc")
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]

    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096
    trim_heap()
    blocks = [libc.malloc(64 << 10) for _ in range(2048)]
    for b in blocks:
        ctypes.memset(b, 1, 64 << 10)
    held = libc.malloc(64 << 10)
    for b in blocks:
        libc.free(b)
    before = rss()
    trim_heap()
    assert before - rss() > 100 << 20
    libc.free(held)


def test_args_stored_in_zstd_and_an_older_database_keeps_zstd_for_the_ingest(tmp_path, monkeypatch):
    """events.args is declared zstd (the rest left to DuckDB: a dictionary for the
    names); a database whose events table predates that, or whose storage format has
    no zstd (DuckDB 1.0's, which rejects the declaration), opens and gets zstd for
    the whole ingest (force_compression) as before; a user's own setting stays."""
    import duckdb
    seen = setting_while_loading(monkeypatch, "force_compression")
    con = db.connect(tmp_path / "z.duckdb")
    ingest_file(con, TRACES[0])
    con.execute("CHECKPOINT")
    stored = dict(con.execute("SELECT column_name, string_agg(DISTINCT compression, ',') FROM pragma_storage_info('events') "
                              "WHERE segment_type <> 'VALIDITY' AND column_name IN ('args', 'name') GROUP BY ALL").fetchall())
    assert stored == {"args": "ZSTD", "name": "DICT_FSST"}
    assert seen == ["auto"]
    ddl = con.execute("SELECT sql FROM duckdb_tables() WHERE table_name = 'events'").fetchone()[0]
    con.execute("DROP TABLE events")                      # the table an older tracedb made
    con.execute(ddl.replace(" USING COMPRESSION ZSTD", ""))
    con.execute("DELETE FROM schema_info WHERE key = ?", [db.ARGS_ZSTD_KEY])
    ingest_file(con, TRACES[1])
    assert seen[-1] == "zstd"
    assert setting(con, "force_compression") == "auto"
    con.execute("SET force_compression = 'uncompressed'")     # the user's: left alone
    ingest_file(con, TRACES[2])
    assert seen[-1] == "uncompressed"
    assert setting(con, "force_compression") == "uncompressed"
    con.close()
    # DuckDB 1.0's storage format: no zstd declared, and the file opens again
    old = tmp_path / "v1.duckdb"
    duckdb.connect(str(old), config={"storage_compatibility_version": "v1.0.0"}).close()
    for _ in range(2):
        con = db.connect(old)
        assert "USING COMPRESSION" not in con.execute("SELECT sql FROM duckdb_tables() WHERE table_name = 'events'").fetchone()[0]
        con.close()
    con = db.connect(old)
    ingest_file(con, TRACES[0])
    assert seen[-1] == "zstd" and con.execute("SELECT count(*) FROM events").fetchone()[0] > 0
    con.close()


def epoch_fraction_trace(tmp_path, raw):
    """raw (TRACES[0] as parsed) moved to epoch µs with a fraction: its doubles cannot
    hold the ns, so the load reads it three times (doubles, then text, then the exact path)."""
    d = json.loads(json.dumps(raw))
    for e in d["traceEvents"]:
        if isinstance(e.get("ts"), (int, float)):
            e["ts"] = f"@{1_700_000_000_000_000 + int(e['ts'])}.001@"      # 1 ns past a whole µs
    p = tmp_path / "epoch.json"
    p.write_text(re.sub(r'"@([0-9.]+)@"', r"\1", json.dumps(d)))
    return p


@pytest.mark.parametrize("retried", [False, True], ids=["read once", "read again (exact path)"])
def test_a_staged_batch_is_let_go_once_inserted(tmp_path, small_pieces, monkeypatch, retried):
    """A trace of many batches: when a batch is inserted, every batch staged before it
    is gone from Python (none held by a retry's exception either), and so is the batch
    itself as parsed (its row-group copy is what is inserted), and DuckDB holds no
    object for any (a temp table made and dropped inside the transaction, or an Arrow
    table registered, stays to its end: every batch was kept, spilled, 5.7 GB of a
    10 GB trace's)."""
    monkeypatch.setattr(trace, "BATCH_BYTES", 1)          # a batch per 128 KB piece
    monkeypatch.setattr(trace, "BATCH_ROWS", 1000)
    monkeypatch.setattr(trace_json, "exact_batches", functools.partial(trace_json.exact_batches, batch_rows=700))
    staged, seen, real_staged, real_insert = [], [], trace._staged, trace.run_script_over

    def temporary(c):
        return (scalar(c, "SELECT count(*) FROM duckdb_tables() WHERE temporary"),
                scalar(c, "SELECT count(*) FROM duckdb_views() WHERE temporary"))

    def stage(rows):
        out = real_staged(rows)
        staged.append(weakref.ref(out))
        return out

    def insert(con_, text, name, table):
        if name == "_trace_staged":          # (the exact path makes its views this way too)
            seen.append((sum(b() is not None for b in staged), temporary(con_)))
        real_insert(con_, text, name, table)
    monkeypatch.setattr(trace, "_staged", stage)
    monkeypatch.setattr(trace, "run_script_over", insert)
    con = db.connect(tmp_path / "b.duckdb")
    before = temporary(con)
    raw = json.load(gzip.open(TRACES[0]))
    path = epoch_fraction_trace(tmp_path, raw) if retried else TRACES[0]
    ingest_file(con, path, run="r")
    n = scalar(con, "SELECT count(*) FROM events")
    assert len(seen) >= 10 and n == scalar(con, "SELECT count(DISTINCT event_id) FROM events") \
        == scalar(con, "SELECT max(event_id) + 1 FROM events") == len(raw["traceEvents"])
    if retried:       # the ns survived: the exact path loaded every ts as the file wrote it
        base = raw.get("baseTimeNanoseconds") or 0
        want = sorted(base + (1_700_000_000_000_000 + int(e["ts"])) * 1000 + 1
                      for e in raw["traceEvents"] if isinstance(e.get("ts"), (int, float)))
        assert [r[0] for r in con.execute("SELECT ts_ns FROM events WHERE ts_ns IS NOT NULL ORDER BY ts_ns").fetchall()] == want
    assert seen == [(0, before)] * len(seen)
    con.close()


def test_exact_path_in_batches_loads_as_in_one(tmp_path, monkeypatch):
    """A cut-off bare array (read by the exact path) of a real trace, staged in
    batches of 1,000 events, loads the same events, kernels, iterations and threads
    as staged at once."""
    path = TRACES[0]
    events = json.load(gzip.open(path))["traceEvents"]
    text = "[\n" + ",\n".join(json.dumps(e) for e in events)
    p = tmp_path / "cut.json"
    p.write_text(text[: text.rindex('{"')] + '{"ph": "X", "na')       # last event half-written
    whole = db.connect(tmp_path / "whole.duckdb")
    with pytest.warns(UserWarning, match="cut off"):
        ingest_file(whole, p, run="r")
    monkeypatch.setattr(trace_json, "exact_batches", functools.partial(trace_json.exact_batches, batch_rows=700))
    monkeypatch.setattr(trace, "BATCH_ROWS", 1000)
    batched = db.connect(tmp_path / "batched.duckdb")
    with pytest.warns(UserWarning, match="cut off"):
        ingest_file(batched, p, run="r")
    got, want = tables(batched, "r"), tables(whole, "r")
    assert len(got["events"]) == len(events) - 1 and len(got["kernels"]) > 100
    for t in TABLES:
        assert got[t] == want[t], t


@pytest.fixture
def many_threads(monkeypatch):
    """The path of a many-core machine on the small fixtures: a piece per DuckDB thread
    (8 threads: batches of 512 KB in 8 pieces) and the unordered insert in chunks of
    2,048 rows, so every thread writes some of each batch."""
    monkeypatch.setattr(trace, "BATCH_BYTES", 8 * (64 << 10))
    monkeypatch.setattr(trace, "MIN_PIECE_BYTES", 16 << 10)
    monkeypatch.setattr(trace, "ROW_GROUP_ROWS", 2048)
    monkeypatch.setattr(trace_json, "TAIL", 16 << 10)


def _with_threads(path, db_path, threads):
    con = db.connect(db_path)
    con.execute(f"SET threads = {threads}")
    ingest_file(con, path)
    return con


@pytest.mark.parametrize("path", TRACES, ids=run_name)
def test_many_threads_load_the_rows_of_one(many_threads, tmp_path, path, monkeypatch):
    """8 threads (8 pieces parsed at once, the next batch while one is inserted, events
    inserted unordered in row-group chunks) give exactly the rows of 1 thread (one piece
    after another, each inserted by that one thread, in order)."""
    parsed = []          # the pieces of each batch parsed
    stage = trace._stage_fast
    monkeypatch.setattr(trace, "_stage_fast", lambda con, tf, pieces: parsed.append(len(pieces)) or stage(con, tf, pieces))
    many = _with_threads(path, tmp_path / "many.duckdb", 8)
    assert sum(parsed) >= 3 and parsed[0] == min(8, sum(parsed)), parsed      # 8 pieces at once (the lenet
    assert len(parsed) >= 2 or "lenet" in run_name(path), parsed            # traces fit in one batch)
    parsed.clear()
    serial = _with_threads(path, tmp_path / "one.duckdb", 1)
    assert set(parsed) == {1}, parsed       # one piece of 512 KB at a time
    name = run_name(path)
    got, want = tables(many, name), tables(serial, name)
    assert len(got["events"]) == len(want["events"]) > 0
    for t in TABLES:
        assert got[t] == want[t], t
    for t in ("collectives", "activity_args", "memory_events"):
        q = f"SELECT * EXCLUDE (run) FROM {t} WHERE run = ? ORDER BY ALL"
        assert many.execute(q, [name]).fetchall() == serial.execute(q, [name]).fetchall(), t
    many.close()
    serial.close()



@pytest.mark.skipif(not hasattr(__import__("os"), "sched_setaffinity") or len(__import__("os").sched_getaffinity(0)) < 2,
                    reason="needs 2 cores and CPU affinity")
def test_a_connection_runs_a_thread_per_core_it_may_use(tmp_path):
    """Pinned to one core (taskset), DuckDB runs one thread there, not one per core of the
    machine; unpinned, DuckDB's own count stays."""
    code = ("import os, sys\n"
            "if sys.argv[1] == 'pinned': os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:1])\n"
            "from tracedb.store import db\n"
            "print(db.connect(sys.argv[2]).execute(\"SELECT current_setting('threads')\").fetchone()[0])\n")
    got = {how: int(subprocess.run([sys.executable, "-c", code, how, str(tmp_path / f"{how}.duckdb")],
                                   check=True, capture_output=True, text=True).stdout)
           for how in ("pinned", "free")}
    import duckdb
    assert got == {"pinned": 1, "free": duckdb.connect().execute("SELECT current_setting('threads')").fetchone()[0]}


def test_profile_names_each_phase_and_derivation_statement(tmp_path, monkeypatch):
    """TRACEDB_PROFILE=1: the ingest's phases (parse, insert, derivation, commit) and each
    table the derivation script makes, by name, each timed once per batch or statement;
    unset, nothing is recorded."""
    from tracedb.progress import phase_times
    from tracedb.store.db import sql_text
    phase_times()
    con = db.connect(tmp_path / "a.duckdb")
    ingest_file(con, TRACES[0])
    assert phase_times() == {}
    monkeypatch.setenv("TRACEDB_PROFILE", "1")
    con = db.connect(tmp_path / "b.duckdb")
    phase_times()
    ingest_file(con, TRACES[0])
    got = phase_times()
    made = re.findall(r"CREATE OR REPLACE TEMP TABLE (\w+)", sql_text("schema", "load/derive_trace.sql"))
    assert {f"  sql create {t}" for t in made} | {"  sql insert kernels", "  sql insert iterations"} <= set(got)
    for k in ("parse (JSON -> Arrow; waited for)", "insert (Arrow -> events)", "derive (kernels, launches, ops, iterations)",
              "commit"):
        assert k in got, k
    assert got["insert (Arrow -> events)"][2] == got["parse (JSON -> Arrow; waited for)"][2] - 1   # one per batch
    assert all(w >= 0 and c >= 0 for w, c, _ in got.values())


def test_phases_of_two_threads_ended_out_of_order(monkeypatch):
    """Files loaded at once time their phases on their own threads: a phase that ends
    leaves the other thread's open one listed, and both are counted."""
    import threading
    from tracedb import progress
    monkeypatch.setenv("TRACEDB_PROFILE", "1")
    progress.phase_times()
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def a():
        with progress.phase("a"):
            a_in.set()
            b_in.wait()
        a_out.set()

    def b():
        a_in.wait()
        with progress.phase("b"):
            b_in.set()
            a_out.wait()
            seen["open"] = list(progress.OPEN)
    threads = [threading.Thread(target=f) for f in (a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen["open"] == ["b"]
    assert progress.OPEN == []
    assert {k: n for k, (_, _, n) in progress.phase_times().items()} == {"a": 1, "b": 1}


def test_a_failed_insert_stops_the_parse_ahead(many_threads, tmp_path, monkeypatch):
    """The insert of the second batch fails while the third is being parsed: the load
    is rolled back whole (one clear error), and the parsing thread and its pieces'
    feeders are gone."""
    import duckdb
    inserted, real = [], trace.run_script_over

    def insert(con, text, name, table):
        inserted.append(table.num_rows)
        if len(inserted) == 2:
            raise duckdb.IOException("IO Error: disk full (planted)")
        return real(con, text, name, table)
    monkeypatch.setattr(trace, "run_script_over", insert)
    before = threading.active_count()
    con = db.connect(tmp_path / "f.duckdb")
    con.execute("SET threads = 8")
    with pytest.raises(IngestError, match="disk full"):
        ingest_file(con, TRACES[0])
    assert len(inserted) == 2
    assert con.execute("SELECT count(*) FROM events").fetchone()[0] == 0
    assert not [t for t in threading.enumerate() if t.name == "tracedb-parse"]
    assert threading.active_count() == before
    con.close()


def test_a_small_first_batch_loads_the_rows_of_even_ones(fixture_db, small_pieces, tmp_path, monkeypatch):
    """An uncompressed trace's first batch cut smaller (its parse has nothing beside it):
    its pieces are cut a quarter the size, the rest as before, and the run's rows are
    the fixture's."""
    path = TRACES[0]
    plain = tmp_path / (run_name(path) + ".json")
    with gzip.open(path, "rb") as f, open(plain, "wb") as out:
        shutil.copyfileobj(f, out)
    monkeypatch.setattr(trace, "BATCH_BYTES", 2 * (128 << 10))       # 2 pieces of 128 KB a batch
    monkeypatch.setattr(trace, "FIRST_BATCH_BYTES", 2 * (32 << 10))  # the first 2 of 32 KB
    spans = []
    split = trace_json.split
    monkeypatch.setattr(trace_json, "split", lambda *a, **k: (lambda tf: spans.extend(tf.spans) or tf)(split(*a, **k)))
    parsed = []
    stage = trace._stage_fast
    monkeypatch.setattr(trace, "_stage_fast", lambda con, tf, pieces: parsed.append(len(pieces)) or stage(con, tf, pieces))
    con = db.connect(tmp_path / "f.duckdb")
    con.execute("SET threads = 2")
    ingest_file(con, plain)
    sizes = [e - s for s, e in spans]
    assert len(sizes) >= 5 and all(32 << 10 <= n < 48 << 10 for n in sizes[:2]), sizes[:4]
    assert all(128 << 10 <= n < 144 << 10 for n in sizes[2:-1]), sizes
    assert parsed[:2] == [2, 2]
    assert tables(con, run_name(path)) == tables(fixture_db, run_name(path))
    con.close()


def test_op_totals_run_under_their_own_cap_and_the_load_cap_comes_back(tmp_path, monkeypatch):
    """--op-totals' scripts sweep the whole run after the derivation, on every thread:
    they run under TOTALS_MEMORY_CAP (a 10 GB trace on 16 threads ran out of the load's
    cap there, the ingest lost whole), and the load's cap, then DuckDB's default, come back
    after; a limit the user set is left alone throughout."""
    seen = []
    limit = "SELECT current_setting('memory_limit')"

    def spy(real):
        def called(con, run):
            seen.append(con.execute(limit).fetchone()[0])
            real(con, run)
        return called
    monkeypatch.setattr(trace, "_store_op_totals", spy(trace._store_op_totals))     # inside the raised cap
    outer = trace.store_op_totals

    def around(con, run):
        outer(con, run)
        seen.append(con.execute(limit).fetchone()[0])                                  # after it
    monkeypatch.setattr(trace, "store_op_totals", around)
    con = db.connect(tmp_path / "a.duckdb")
    default = con.execute("SELECT current_setting('memory_limit')").fetchone()[0]
    ingest_file(con, TRACES[0], options={"op_totals": True})
    assert seen == ["2.0 GiB", "896.0 MiB"]
    assert con.execute("SELECT current_setting('memory_limit')").fetchone()[0] == default
    seen.clear()
    con.execute("SET memory_limit = '3GB'")
    ingest_file(con, TRACES[1], options={"op_totals": True})
    assert seen == ["2.7 GiB", "2.7 GiB"]          # 3 GB


@pytest.mark.parametrize("large", [True, False], ids=["large: lower cap", "small: the load's cap"])
def test_a_large_traces_derivation_runs_under_its_lower_cap_with_the_same_rows(fixture_db, tmp_path, monkeypatch,
                                                                                large):
    """A trace of trace.DERIVE_CAP_EVENTS events or more is derived under DuckDB's
    DERIVE_MEMORY_CAP (here 16 MiB: its statements spill), a smaller one under the load's
    LOAD_MEMORY_CAP, the kernels' insert with the rest; --op-totals' scripts after it are raised from the load's cap as
    before (TOTALS_MEMORY_CAP, not left at the lower one), and the limit is DuckDB's own
    again after the ingest. The rows are those of the fixture ingested as landed."""
    from tracedb.store.db import sql_text

    def shown(cap):         # DuckDB's text for a limit of cap bytes
        c = duckdb.connect()
        c.execute(f"SET memory_limit = '{cap}B'")
        return c.execute("SELECT current_setting('memory_limit')").fetchone()[0]
    path = TRACES[0]
    n = len(json.load(gzip.open(path))["traceEvents"])
    monkeypatch.setattr(trace, "DERIVE_CAP_EVENTS", n if large else n + 1)
    monkeypatch.setattr(trace, "DERIVE_MEMORY_CAP", 16 << 20)
    scripts = {sql_text("schema", f"load/{s}.sql"): s for s in ("derive_trace", "trace_system", "iteration_aggregates")}
    derive_statements = set(statements(sql_text("schema", "load/derive_trace.sql")))
    limits, real = {}, trace.run_script

    def recorded(con_, text, *a, **k):
        # derive_trace.sql runs in three parts: before the kernels' insert, the insert, after
        part = scripts.get(text) or ("kernels_insert" if text in derive_statements and
                                     re.search(r"^INSERT INTO kernels\b", text, re.M) else
                                     "derive_trace" if re.search(r"^INSERT INTO threads\b", text, re.M) else None)
        if part:
            limits[part] = scalar(con_, "SELECT current_setting('memory_limit')")
        return real(con_, text, *a, **k)
    monkeypatch.setattr(trace, "run_script", recorded)
    con = db.connect(tmp_path / "c.duckdb")
    default = scalar(con, "SELECT current_setting('memory_limit')")
    ingest_file(con, path, options={"op_totals": True})
    derive = shown(16 << 20 if large else trace.LOAD_MEMORY_CAP)
    assert limits == {"derive_trace": derive, "trace_system": derive,
                      "kernels_insert": derive,
                      "iteration_aggregates": shown(trace.TOTALS_MEMORY_CAP)}
    assert scalar(con, "SELECT current_setting('memory_limit')") == default
    name = run_name(path)
    assert tables(con, name) == tables(fixture_db, name)
    con.close()


def test_many_kernels_are_inserted_in_ranges_of_launch_order(fixture_db, tmp_path, monkeypatch):
    """More kernels than trace.KERNEL_INSERT_ROWS (here 100) are inserted in ranges of
    launch order, one statement a range (each its own sort, a part of the memory): the
    same rows as the fixture ingested in one statement, and the table in launch order."""
    path = TRACES[0]
    monkeypatch.setattr(trace, "KERNEL_INSERT_ROWS", 100)
    from tracedb.store.db import sql_text
    derive_statements = set(statements(sql_text("schema", "load/derive_trace.sql")))
    inserts, real = [], trace.run_script

    def counted(con_, text, *a, **k):
        if text in derive_statements and re.search(r"^INSERT INTO kernels\b", text, re.M):
            inserts.append(scalar(con_, "SELECT getvariable('tracedb_seq_from')"))
        return real(con_, text, *a, **k)
    monkeypatch.setattr(trace, "run_script", counted)
    con = db.connect(tmp_path / "r.duckdb")
    ingest_file(con, path)
    name = run_name(path)
    n = scalar(con, "SELECT count(*) FROM kernels WHERE run = ?", [name])
    assert n > 300 and inserts == list(range(0, n, 100))
    assert scalar(con, "SELECT getvariable('tracedb_seq_from')") is None      # (reset after)
    seqs = [r[0] for r in con.execute("SELECT seq FROM kernels WHERE run = ?", [name]).fetchall()]
    assert seqs == list(range(n))            # the table's own order: launch order
    assert tables(con, name) == tables(fixture_db, name)
    con.close()
