"""Bad input: a clear error naming the file, and the database exactly as it was."""
import gzip
import json
import shutil

import pytest

from conftest import DATA, raw_trace
from tracedb.store.sql import rows, scalar
from tracedb.ingest import IngestError, ingest_file

AMP = DATA / "torch" / "h100_resnet50_bs64_amp.json.gz"


def snapshot(con):
    return [scalar(con, f"SELECT count(*) FROM {t}") for t in ("runs", "events", "kernels", "iterations", "threads")]


@pytest.fixture
def loaded_db(fresh_db):
    ingest_file(fresh_db, DATA / "tf" / "cpu_sync_lenet_bs64.json.gz")
    return fresh_db


def _write(tmp_path, name, data):
    p = tmp_path / name
    p.write_bytes(data if isinstance(data, bytes) else data.encode())
    return p


@pytest.mark.parametrize("name,data,words", [
    ("empty.json", "", "empty"),
    ("notes.txt", "hello, this is not a trace\n", "unknown format"),
    ("obj.json", '{"a": 1, "b": [1, 2]}', "no traceEvents"),
    ("bad_events.json", '{"traceEvents": 5}', "not an array"),
    ("cut_object.json", '{"schemaVersion": 1, "traceEvents": [{"ph": "X", "ts": 1, "dur": 2}, {"ph": "X", "ts"',
     "truncated"),
    ("garbage_inside.json", '{"traceEvents": [{"ph": "X", "ts": 1, "dur": 2}, nonsense]}', "malformed"),
    ("scalar_event.json", '[{"ph": "X", "ts": 1, "dur": 2}, 42]', "malformed"),
    ("base_huge.json", '{"baseTimeNanoseconds": 10000000000000000000000000, "traceEvents": [{"ph": "X", "ts": 1}]}',
     "baseTimeNanoseconds 10000000000000000000000000 is not a time in ns"),
    ("base_negative.json", '{"baseTimeNanoseconds": -1, "traceEvents": [{"ph": "X", "ts": 1}]}',
     "baseTimeNanoseconds -1 is not a time in ns"),
])
def test_rejected_with_clear_error_and_nothing_lost(loaded_db, tmp_path, name, data, words):
    before = snapshot(loaded_db)
    p = _write(tmp_path, name, data)
    with pytest.raises(IngestError) as e:
        ingest_file(loaded_db, p)
    assert str(p) in str(e.value) and words in str(e.value)
    assert snapshot(loaded_db) == before


@pytest.mark.parametrize("original,replacement,words", [
    (b"NllLossBackward0", b"NllLoss\xe9\xff", "has bytes that are not UTF-8 (at byte {at} of the content)"),
    (b"NllLossBackward0", b"NllLoss\\udcff", "lone UTF-16 surrogate"),
    (b'"args": {', b'"args": {"note": "x\\udcff", ', "lone UTF-16 surrogate"),
])
def test_text_that_is_not_utf8_is_refused_by_name(loaded_db, tmp_path, original, replacement, words):
    """A real trace with one name made of bytes that are not UTF-8 (latin-1), or
    with an escape of half a UTF-16 pair in a name or in args: one error naming the
    file and the byte (the message was pyarrow's, 'utf-8 codec can't encode', and no
    file; in args, 'malformed trace JSON'), and the database as it was."""
    text = gzip.decompress(AMP.read_bytes())
    at = text.index(original) + len(b"NllLoss")
    p = _write(tmp_path, "odd_bytes.json", text.replace(original, replacement, 1))
    before = snapshot(loaded_db)
    with pytest.raises(IngestError) as e:
        ingest_file(loaded_db, p)
    assert str(e.value).startswith(str(p)) and words.format(at=at) in str(e.value)
    assert snapshot(loaded_db) == before


@pytest.mark.parametrize("chunk", [997, 1001])
def test_utf8_split_by_a_chunk_end_is_read_whole(fresh_db, tmp_path, monkeypatch, chunk):
    """The exact path (here: a real trace as a cut-off bare array) reads its text in
    chunks; names with characters of 2 to 4 bytes (µ, é, €, 𝜇) that chunks of 997 or
    1,001 bytes cut in two load as written (each chunk decoded alone, their halves
    read as bytes that are not UTF-8: the valid file was refused)."""
    from tracedb.ingest import trace_json
    events = json.loads(gzip.decompress(AMP.read_bytes()))["traceEvents"][:400]
    for k, e in enumerate(events):
        if "name" in e:
            e["name"] = f"{e['name']} µé€𝜇{k}"
    text = "[\n" + ",\n".join(json.dumps(e, ensure_ascii=False) for e in events)
    p = _write(tmp_path, "utf8_cut.json", (text[: text.rindex('{"')] + '{"ph": "X", "na').encode())
    monkeypatch.setattr(trace_json, "CHUNK", chunk)
    with pytest.warns(UserWarning, match="cut off"):
        ingest_file(fresh_db, p, run="u")
    got = [r[0] for r in rows(fresh_db, "SELECT name FROM events WHERE run = 'u' ORDER BY event_id")]
    assert got == [e.get("name") for e in events[:-1]]


def test_truncated_gzip_of_object_trace_rejected(loaded_db, tmp_path):
    data = AMP.read_bytes()
    p = _write(tmp_path, "cut.json.gz", data[: len(data) // 2])
    before = snapshot(loaded_db)
    with pytest.raises(IngestError, match="truncated"):
        ingest_file(loaded_db, p)
    assert snapshot(loaded_db) == before


def test_bare_array_cut_off_is_repaired_with_warning(fresh_db, tmp_path):
    doc = raw_trace(AMP)
    events = doc["traceEvents"][:500]
    text = "[\n" + ",\n".join(json.dumps(e, default=str) for e in events)
    cut = text[: text.rindex('{"ph"')] + '{"ph": "X", "cat": "cpu_op", "na'   # last event half-written
    p = _write(tmp_path, "cut_array.json", cut)
    complete = cut.count('{"ph"') - 1
    with pytest.warns(UserWarning, match="cut off"):
        r = ingest_file(fresh_db, p)
    assert scalar(fresh_db, "SELECT count(*) FROM events WHERE run = ?", [r.run]) == complete


def test_bare_array_and_object_forms_load_the_same(fresh_db, tmp_path):
    doc = json.loads(gzip.decompress(AMP.read_bytes()))
    p = _write(tmp_path, "bare.json", json.dumps(doc["traceEvents"]))
    r = ingest_file(fresh_db, p)
    got = rows(fresh_db, "SELECT count(*), count(DISTINCT correlation), sum(dur_ns) FROM events WHERE run = ?",
               [r.run])[0]
    assert got[0] == len(doc["traceEvents"])
    assert got[2] == sum(round(float(e.get("dur", 0)) * 1000) for e in doc["traceEvents"] if "dur" in e)


def test_odd_fields_strings_nan_are_handled(fresh_db, tmp_path):
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "a", "pid": "host", "tid": 1, "ts": 10.5, "dur": 1},
        {"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": "t", "ts": "abc", "dur": "2.5"},
        {"ph": "X", "cat": "cpu_op", "name": 3, "pid": 1, "tid": 2, "ts": 12, "dur": 1, "args": {"x": [1, {"y": 2}]}},
        {"ph": "i", "name": "mark", "pid": 1, "tid": 2, "ts": 13},
        {},
    ]
    p = _write(tmp_path, "odd.json", json.dumps({"traceEvents": events}).replace('"abc"', "NaN"))
    r = ingest_file(fresh_db, p)
    got = rows(fresh_db, "SELECT name, pid, tid, ts_ns, dur_ns FROM events WHERE run = ? ORDER BY event_id", [r.run])
    assert got == [("a", "host", "1", 10500, 1000), ("b", "1", "t", None, 2500), ("3", "1", "2", 12000, 1000),
                   ("mark", "1", "2", 13000, None), (None, None, None, None, None)]


def test_same_content_twice_is_a_noop(fresh_db, tmp_path):
    r1 = ingest_file(fresh_db, AMP)
    before = snapshot(fresh_db)
    plain = _write(tmp_path, "copy.json", gzip.decompress(AMP.read_bytes()))
    r2 = ingest_file(fresh_db, plain)          # same content, not compressed, other name
    assert r2.status == "skipped" and r2.run == r1.run and r1.run in r2.message
    assert snapshot(fresh_db) == before


def test_run_names(fresh_db, tmp_path):
    a = ingest_file(fresh_db, DATA / "tf" / "cpu_sync_lenet_bs64.json.gz", run="mine")
    assert a.run == "mine"
    shutil.copy(DATA / "tf" / "cpu_async_lenet_bs64.json.gz", tmp_path / "mine.json.gz")
    b = ingest_file(fresh_db, tmp_path / "mine.json.gz")
    assert b.run == "mine~2"
    with pytest.raises(IngestError, match="already exists"):
        ingest_file(fresh_db, DATA / "tf" / "cpu_async_resnet50_bs4.json.gz", run="mine")


def test_xplane_without_xprof_says_how_to_enable(fresh_db, tmp_path):
    try:
        import xprof  # noqa: F401
        pytest.skip("xprof is installed: the message is for machines without it")
    except ImportError:
        pass
    p = _write(tmp_path, "host.xplane.pb", b"\x0a\x00")
    with pytest.raises(IngestError, match=r"pip install 'tracedb\[tf\]'"):
        ingest_file(fresh_db, p)


def _zlib_only(path):
    """The content and problem of a gzip file as Python's zlib alone reads it, fed
    1 MiB at a time (the reference for pyarrow's faster inflate, which hands over
    to zlib on an error)."""
    import zlib
    out, d, why = [], zlib.decompressobj(31), None
    with open(path, "rb") as f:
        while data := f.read(1 << 20):
            try:
                while data:
                    out.append(d.decompress(data))
                    data = d.unused_data if d.eof else b""
                    if data.lstrip(b"\x00") == b"":
                        data = b""
                    elif d.eof:
                        d = zlib.decompressobj(31)
            except zlib.error as e:
                why = f"the gzip stream is corrupt ({e})"
                break
        else:
            if not d.eof:
                why = "the gzip stream is cut off (no end-of-stream marker)"
    return b"".join(out), why


@pytest.mark.parametrize("shape", ["whole", "two members", "zero padding", "two members and padding",
                                   "cut in the middle", "no trailer", "corrupt in the middle"])
def test_gzip_read_as_zlib_reads_it(tmp_path, shape):
    """pyarrow inflates gzip (2.4x zlib); where it stops with an error, zlib goes on
    from the same byte: content and problem are zlib's, for a real trace."""
    from tracedb.ingest.source import open_bytes, problem
    a = (DATA / "tf" / "cpu_async_resnet50_bs4.json.gz").read_bytes()     # 2 MB: zlib reads it in 1 MiB steps
    b = gzip.compress(b'{"traceEvents": []}')
    data = {"whole": a, "two members": a + b, "zero padding": a + b"\0" * 64,
            "two members and padding": a + b + b"\0" * 7, "cut in the middle": a[: len(a) // 2],
            "no trailer": a[:-8], "corrupt in the middle": a[: 3 * len(a) // 4] + b"\xff" * 4096 + a[3 * len(a) // 4 + 4096:]}[shape]
    p = _write(tmp_path, "t.json.gz", data)
    with open_bytes(p) as f:
        got, why = f.read(), problem(f)
    want, want_why = _zlib_only(p)
    assert why == want_why and len(want) > (1 << 20 if why is None else 0)
    if shape == "corrupt in the middle":
        # a corrupt deflate stream decodes to garbage until the error shows: pyarrow,
        # reading 4 MiB at a time, may hand on more of it than zlib did; the same
        # content up to there, and the same problem (the trace is refused or cut there)
        assert got[:len(want)] == want
    else:
        assert got == want
    assert (why is None) == (shape in ("whole", "two members", "zero padding", "two members and padding"))
