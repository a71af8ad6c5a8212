"""The bad-input matrix: each case is a real fixture changed in one way a user's
file can be wrong, and the test says what tracedb must do with it: read it
right (compared with the fixture read independently), warn (a line naming the
file, kept in the ingest log), or refuse (one line naming the file and the
cause, the database exactly as it was)."""
import copy
import csv
import gzip
import io
import json
import lzma
import os
import shutil
import signal
import subprocess
import sys
import time
import warnings
from decimal import Decimal

import pytest

from conftest import AMP_TRACE, DATA, raw_trace
from independent import launches, ns
from tracedb.store import db
from tracedb.query import reports
from tracedb.cli import main
from tracedb.store.sql import rows, scalar
from tracedb.ingest import IngestError, ingest_file, trace_json
from tracedb.ingest.workdir import workdir

LENET = DATA / "tf" / "cpu_sync_lenet_bs64.json.gz"
SMALL_RAW = DATA / "ncu" / "h200_small_cnn_raw.csv.gz"
SMALL_DETAILS = DATA / "ncu" / "h200_small_cnn_details.csv.gz"
SMI_UNITS = DATA / "power" / "h200_nvidia_smi_units.csv.gz"
SAMPLER = DATA / "power" / "h100_resnet50_bs64_amp.csv"
TABLES = ("runs", "events", "kernels", "iterations", "counters", "power", "ingest_log")


def snapshot(con):
    return [scalar(con, f"SELECT count(*) FROM {t}") for t in TABLES]


def refused(con, path, words, **kw):
    """Ingest must fail with one line naming the file and `words`, changing nothing."""
    before = snapshot(con)
    with pytest.raises(IngestError) as e:
        ingest_file(con, path, **kw)
    msg = str(e.value)
    assert msg.startswith(str(path) + ": ") and "\n" not in msg and words in msg, msg
    assert snapshot(con) == before
    return msg


def ingest_warned(con, path, **kw):
    """(result, warning lines) of an ingest that must succeed."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = ingest_file(con, path, **kw)
    return r, [str(w.message) for w in caught]


def log_of(con, run, level="warning"):
    return [m for (m,) in rows(con, "SELECT message FROM ingest_log WHERE run = ? AND level = ? ORDER BY entry",
                               [run, level])]


@pytest.fixture(scope="module")
def amp_doc():
    return raw_trace(AMP_TRACE)


def dump(doc):
    return json.dumps(doc, default=lambda d: float(d) if isinstance(d, Decimal) else str(d))


def write(tmp_path, name, data):
    p = tmp_path / name
    p.write_bytes(data if isinstance(data, bytes) else data.encode())
    return p


def cli(*args):
    """Run the CLI in a subprocess (signals, rlimits, environment): CompletedProcess."""
    env = dict(os.environ, **args[-1]) if isinstance(args[-1], dict) else None
    argv = [a for a in args if not isinstance(a, dict)]
    return subprocess.run([sys.executable, "-m", "tracedb.cli", *argv], capture_output=True, text=True, env=env)


# ---------------------------------------------------------------- traces: read right, or warn

def test_negative_duration_is_dropped_with_a_warning(fresh_db, tmp_path, amp_doc):
    """One kernel of the real trace with a negative dur: the utilization stays a share
    of the iteration (it was -1752%), the duration is NULL, a warning says so."""
    doc = copy.deepcopy(amp_doc)
    gpu = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    victim = max(gpu, key=lambda e: e["dur"])
    victim["dur"] = -abs(victim["dur"]) * 1000
    p = write(tmp_path, "neg.json", dump(doc))
    r, said = ingest_warned(fresh_db, p)
    assert said == [f"{p}: 1 events have a negative duration; it was dropped (dur NULL) (first: {victim['name']!r})"]
    assert log_of(fresh_db, r.run) == [said[0][len(str(p)) + 2:]]
    assert scalar(fresh_db, "SELECT count(*) FROM kernels WHERE run = ? AND dur_ns IS NULL", [r.run]) == 1
    assert scalar(fresh_db, "SELECT count(*) FROM events WHERE run = ? AND dur_ns < 0", [r.run]) == 0
    util = [x["gpu_util_pct"] for x in reports.run(fresh_db, "gpu_utilization",
                                                    {"run": r.run}).to_pylist()]
    assert util and all(0 <= u <= 100 for u in util)


def test_events_without_ts_are_named(fresh_db, tmp_path, amp_doc):
    """A kernel and an op of the real trace with their ts left out (a null ts, a
    missing one) load with ts NULL and a warning naming the first; the metadata
    events (ph M), which TensorFlow's traces write without a ts, are not named."""
    doc = copy.deepcopy(amp_doc)
    kernel = next(e for e in doc["traceEvents"] if e.get("cat") == "kernel")
    op = next(e for e in doc["traceEvents"] if e.get("cat") == "cpu_op")
    kernel["ts"] = None
    del op["ts"]
    for e in doc["traceEvents"]:
        if e.get("ph") == "M":
            e.pop("ts", None)
    first = min((kernel, op), key=doc["traceEvents"].index)
    p = write(tmp_path, "nots.json", dump(doc))
    r, said = ingest_warned(fresh_db, p)
    assert said == [f"{p}: 2 events have no ts (only metadata events, ph M, may lack one); stored with ts NULL, "
                    f"outside every iteration and report (first: {first['name']!r})"]
    assert scalar(fresh_db, "SELECT count(*) FROM events WHERE run = ? AND ts_ns IS NULL AND ph <> 'M'", [r.run]) == 2


def test_nan_and_infinity_are_null_with_a_warning(fresh_db, tmp_path, amp_doc):
    doc = copy.deepcopy(amp_doc)
    ops = [e for e in doc["traceEvents"] if e.get("cat") == "cpu_op"]
    ops[0]["dur"], ops[1]["ts"] = "@NAN@", "@INF@"
    text = dump(doc).replace('"@NAN@"', "NaN").replace('"@INF@"', "-Infinity")
    p = write(tmp_path, "nan.json", text)
    r, said = ingest_warned(fresh_db, p)
    assert len(said) == 1 and "2 events have a ts or dur that is not a number" in said[0]
    got = rows(fresh_db, "SELECT name, ts_ns, dur_ns FROM events WHERE run = ? AND (ts_ns IS NULL OR dur_ns IS NULL) "
                         "AND ph = 'X' AND cat = 'cpu_op' ORDER BY event_id", [r.run])
    assert [(g[0], g[1] is None, g[2] is None) for g in got] == [(ops[0]["name"], False, True),
                                                                 (ops[1]["name"], True, False)]
    assert log_of(fresh_db, r.run) == [said[0].split(": ", 1)[1]]


def test_correlation_beyond_64_bits_keeps_the_kernel_launch(fresh_db, tmp_path, amp_doc):
    """Every correlation id shifted past 2^70: each kernel keeps the launch that the
    independent reference (independent.launches) finds for it."""
    doc = copy.deepcopy(amp_doc)
    for e in doc["traceEvents"]:
        a = e.get("args") or {}
        if "correlation" in a:
            a["correlation"] = 2 ** 70 + int(a["correlation"])
    p = write(tmp_path, "bigcorr.json", dump(doc))
    r, said = ingest_warned(fresh_db, p)
    assert len(said) == 1 and "beyond 64 bits" in said[0]
    ref = launches(doc)
    expect = sorted((e["name"], ref[e["args"]["correlation"]][1]["name"]) for e in doc["traceEvents"]
                    if e.get("cat") == "kernel" and e["args"]["correlation"] in ref)
    got = sorted(rows(fresh_db, "SELECT name, launch_name FROM kernels WHERE run = ? AND kind = 'kernel'", [r.run]))
    assert got == expect and all(g[1] is not None for g in got)


def test_ids_that_are_not_integers_link_to_nothing(fresh_db, tmp_path, amp_doc):
    """A kernel of the real trace given the correlation of another launch minus a half
    (DuckDB's cast rounded it onto that launch), and an op given a text External id:
    both NULL, named in one warning; every other kernel keeps the launch that the
    independent reference finds for it, one of them with its correlation written as
    digits ("123") and its launch's as a whole float (123.0)."""
    doc = copy.deepcopy(amp_doc)
    ref = launches(doc)
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel" and e["args"]["correlation"] in ref]
    corr = {id(e): e["args"]["correlation"] for e in kernels}
    victim, other, written = kernels[10], kernels[20], kernels[30]
    victim["args"]["correlation"] = other["args"]["correlation"] - 0.5
    written["args"]["correlation"] = str(corr[id(written)])
    ref[corr[id(written)]][1]["args"]["correlation"] = float(corr[id(written)])
    op = next(e for e in doc["traceEvents"] if e.get("cat") == "cpu_op" and "External id" in e["args"])
    op["args"]["External id"] = "first"
    p = write(tmp_path, "fraction.json", dump(doc))
    r, said = ingest_warned(fresh_db, p)
    first = min((victim, op), key=doc["traceEvents"].index)
    assert said == [f"{p}: 2 events have a correlation or external id that is not an integer (a fraction, text, "
                    f"or a float beyond 64 bits); stored as NULL, so they link to nothing (first: {first['name']!r})"]
    got = {(n, t): (c, launch) for n, t, c, launch in rows(
        fresh_db, "SELECT name, ts_ns, correlation, launch_name FROM kernels WHERE run = ? AND kind = 'kernel'",
        [r.run])}
    assert got[(victim["name"], ns(doc, victim["ts"]))] == (None, None)
    expect = {(e["name"], ns(doc, e["ts"])): (corr[id(e)], ref[corr[id(e)]][1]["name"])
              for e in kernels if e is not victim}
    assert {k: v for k, v in got.items() if k in expect} == expect
    assert scalar(fresh_db, "SELECT count(*) FROM events WHERE run = ? AND cat = 'cpu_op' AND external_id IS NULL",
                  [r.run]) == 1


def test_args_that_are_not_objects_and_gpu_events_that_are_not_complete_are_named(fresh_db, tmp_path, amp_doc):
    """A kernel's args made a list, an op's a string, another kernel made an instant
    event (ph i) and one more left without a ph: each kind named in a warning with its
    count and first event; the args are kept as written, and neither of those two
    kernels is a kernel."""
    doc = copy.deepcopy(amp_doc)
    gpu = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    listed, instant, phless = gpu[3], gpu[7], gpu[9]
    del phless["ph"]
    listed["args"] = [listed["args"]]
    op = next(e for e in doc["traceEvents"] if e.get("cat") == "cpu_op")
    op["args"] = "not an object"
    instant["ph"] = "i"
    p = write(tmp_path, "oddargs.json", dump(doc))
    r, said = ingest_warned(fresh_db, p)
    first = min((listed, op), key=doc["traceEvents"].index)
    assert said == [
        f"{p}: 2 events have args that are not a JSON object (a list, a string or a number); kept as written, with "
        f"no correlation, external id, stream or device (first: {first['name']!r})",
        f"{p}: 2 events are GPU activity (a kernel, memcpy or memset category) but not a complete event (ph X, "
        f"or no ph); kept in events, left out of kernels (first: {instant['name']!r})"]
    assert scalar(fresh_db, "SELECT count(*) FROM kernels WHERE run = ? AND kind = 'kernel'", [r.run]) == len(gpu) - 2
    kept = {a for (a,) in rows(fresh_db, "SELECT CAST(args AS VARCHAR) FROM events WHERE run = ? "
                                         "AND NOT starts_with(CAST(args AS VARCHAR), '{')", [r.run])}
    assert {json.loads(a) for a in kept if a.startswith('"')} == {"not an object"}
    assert [json.loads(a) for a in kept if a.startswith("[")] == [json.loads(dump(listed["args"]))]


@pytest.mark.parametrize("dist, rank, world, said", [
    ({"rank": 1, "world_size": 4}, 1, 4, None),
    ({"rank": "1", "world_size": "2"}, 1, 2, None),          # digits and whole floats are ranks
    ({"rank": 1.0, "world_size": 4.0}, 1, 4, None),
    ({"rank": "abc", "world_size": 2}, None, 2, 'rank "abc" is not an integer from 0 to 2^31 - 1'),
    ({"rank": 2.5, "world_size": 4}, None, 4, "rank 2.5 is not an integer from 0 to 2^31 - 1"),
    ({"rank": True, "world_size": 4}, None, 4, "rank true is not an integer from 0 to 2^31 - 1"),
    ({"rank": 2 ** 40, "world_size": 4}, None, 4, f"rank {2 ** 40} is not an integer from 0 to 2^31 - 1"),
    ({"rank": 5, "world_size": 4}, None, None, "rank 5 is not below world_size 4: both"),
    ({"rank": 0, "world_size": 0}, 0, None, "world_size 0 is not an integer from 1 to 2^31 - 1"),
    ([0, 4], None, None, None),
])
def test_distributed_info_that_names_no_rank_is_left_out(fresh_db, tmp_path, amp_doc, dist, rank, world, said):
    """The real trace with an odd distributedInfo: what is not a rank of its world is
    warned of and left out (it was a database error for text, and rounded, negative
    or past the world size silently); the trace still loads."""
    doc = copy.deepcopy(amp_doc)
    doc["distributedInfo"] = dist
    p = write(tmp_path, "dist.json", dump(doc))
    r, warned = ingest_warned(fresh_db, p)
    if isinstance(dist, list):
        assert warned == [f"{p}: distributedInfo is not an object (list); ignored"]
    else:
        assert warned == ([f"{p}: distributedInfo: {said}; left out (--rank N sets the rank)"] if said else [])
    assert rows(fresh_db, "SELECT rank, world_size FROM runs WHERE run = ?", [r.run]) == [(rank, world)]


def test_device_properties_that_are_not_objects_are_named(fresh_db, tmp_path, amp_doc):
    doc = copy.deepcopy(amp_doc)
    doc["deviceProperties"] = "NVIDIA H100"
    p = write(tmp_path, "dev.json", dump(doc))
    r, warned = ingest_warned(fresh_db, p)
    assert warned == [f"{p}: deviceProperties is not a list of objects; kept in the run's metadata only"]
    assert rows(fresh_db, "SELECT device_name, device_properties, json_extract_string(metadata, '$.deviceProperties') "
                          "FROM runs WHERE run = ?", [r.run]) == [(None, None, "NVIDIA H100")]


def test_gzip_without_its_trailer_loads_whole_with_a_warning(fresh_db, tmp_path, amp_doc):
    p = write(tmp_path, "notrailer.json.gz", AMP_TRACE.read_bytes()[:-8])
    r, said = ingest_warned(fresh_db, p)
    assert r.status == "loaded" and len(said) == 1 and "cut off" in said[0] and "JSON is complete" in said[0]
    assert scalar(fresh_db, "SELECT n_events FROM runs WHERE run = ?", [r.run]) == len(amp_doc["traceEvents"])


def test_xz_trace_reads_like_its_gzip(fresh_db, tmp_path, amp_doc):
    p = write(tmp_path, "amp.json.xz", lzma.compress(gzip.decompress(AMP_TRACE.read_bytes())))
    r = ingest_file(fresh_db, p)
    assert r.run == "amp" and r.status == "loaded"
    assert scalar(fresh_db, "SELECT n_events FROM runs") == len(amp_doc["traceEvents"])
    again = ingest_file(fresh_db, AMP_TRACE)          # same content: the same hash
    assert again.status == "skipped" and again.run == "amp"


def test_cross_filesystem_temp_dir_falls_back_to_a_user_space_copy(fresh_db, tmp_path, amp_doc, monkeypatch):
    """copy_file_range gives EXDEV when $TMPDIR is on another filesystem (tmpfs /tmp):
    the copy goes through user space and loads the same events."""
    import errno

    def exdev(*a):
        raise OSError(errno.EXDEV, "Invalid cross-device link")
    monkeypatch.setattr(os, "copy_file_range", exdev)
    monkeypatch.setattr(trace_json, "_KERNEL_COPY", [True])
    monkeypatch.setattr(trace_json._Pipes, "usable", staticmethod(lambda: False))    # piece files
    p = write(tmp_path, "plain.json", gzip.decompress(AMP_TRACE.read_bytes()))
    r = ingest_file(fresh_db, p)
    assert scalar(fresh_db, "SELECT n_events FROM runs WHERE run = ?", [r.run]) == len(amp_doc["traceEvents"])
    assert trace_json._KERNEL_COPY == [False]


def test_a_tmpdir_without_named_pipes_copies_the_pieces(fresh_db, tmp_path, amp_doc, monkeypatch):
    """mkfifo refused (vfat, some FUSE filesystems): the pieces are copied into files."""
    import errno

    def eperm(*a, **k):
        raise OSError(errno.EPERM, "Operation not permitted")
    monkeypatch.setattr(os, "mkfifo", eperm)
    p = write(tmp_path, "plain.json", gzip.decompress(AMP_TRACE.read_bytes()))
    r = ingest_file(fresh_db, p)
    assert r.status == "loaded"
    assert scalar(fresh_db, "SELECT n_events FROM runs WHERE run = ?", [r.run]) == len(amp_doc["traceEvents"])


def test_a_feeder_that_fails_is_an_error_not_a_hang(fresh_db, tmp_path, amp_doc, monkeypatch):
    """A read of the trace failing under one pipe (EIO on its third piece): DuckDB,
    waiting on that pipe, gets an end of file, and the ingest one error naming the
    file; nothing loaded, no feeder left."""
    import errno
    import threading
    monkeypatch.setattr(trace_json, "PIECE_BYTES", 64 << 10)
    monkeypatch.setattr(trace_json, "TAIL", 16 << 10)
    splice = trace_json._kernel_splice

    def failing(src, out, n, pos):
        if pos > (160 << 10):
            raise OSError(errno.EIO, "Input/output error")
        return splice(src, out, n, pos)
    monkeypatch.setattr(trace_json, "_kernel_splice", failing)
    p = write(tmp_path, "plain.json", gzip.decompress(AMP_TRACE.read_bytes()))
    threads = threading.active_count()
    got = []
    t = threading.Thread(target=lambda: got.append(pytest.raises(IngestError, ingest_file, fresh_db, p)), daemon=True)
    t.start()
    t.join(120)
    assert not t.is_alive(), "the ingest hangs"
    assert got and "input/output error" in str(got[0].value) and str(p) in str(got[0].value)
    for _ in range(100):       # a feeder may still be on its way out on a loaded machine: not left behind
        if threading.active_count() == threads:
            break
        time.sleep(0.1)
    assert threading.active_count() == threads
    assert scalar(fresh_db, "SELECT count(*) FROM runs") == 0


def test_a_filesystem_without_splice_feeds_the_pipes_from_user_space(fresh_db, tmp_path, amp_doc, monkeypatch):
    """splice fails with EINVAL where the file's filesystem cannot splice (some FUSE
    and network ones): the pipes are fed through user space, the same events load."""
    import errno

    def einval(*a, **k):
        raise OSError(errno.EINVAL, "Invalid argument")
    monkeypatch.setattr(os, "splice", einval)
    monkeypatch.setattr(trace_json, "_KERNEL_SPLICE", [True])
    p = write(tmp_path, "plain.json", gzip.decompress(AMP_TRACE.read_bytes()))
    r = ingest_file(fresh_db, p)
    events = fresh_db.execute("SELECT name, ts_ns FROM events WHERE run = ? ORDER BY event_id", [r.run]).fetchall()
    assert [e["name"] for e in amp_doc["traceEvents"]] == [n for n, _ in events]
    assert trace_json._KERNEL_SPLICE == [False]


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="no tmpfs at /dev/shm")
def test_tmpdir_on_tmpfs_really(fresh_db, tmp_path, amp_doc, monkeypatch):
    import tempfile
    shm = tempfile.mkdtemp(dir="/dev/shm")
    monkeypatch.setattr(tempfile, "tempdir", shm)
    try:
        p = write(tmp_path, "plain.json", gzip.decompress(AMP_TRACE.read_bytes()))
        r = ingest_file(fresh_db, p)
        assert scalar(fresh_db, "SELECT n_events FROM runs WHERE run = ?", [r.run]) == len(amp_doc["traceEvents"])
        assert os.listdir(shm) == []
    finally:
        shutil.rmtree(shm, ignore_errors=True)


# ---------------------------------------------------------------- traces: refused, by name

@pytest.mark.parametrize("make,words", [
    (lambda d: dump(d["deviceProperties"]), 'no "ph" field'),
    (lambda d: dump({"schema": "1.1.1-chakra.0.0.4", "pid": 1, "time": "2026-11-22", "start_ts": 1,
                     "nodes": [{"id": i, "name": e["name"], "ctrl_deps": 0} for i, e in
                               enumerate(d["traceEvents"][:50])], "finish_ts": 9}), "PyTorch execution trace"),
    (lambda d: dump([[e["ts"] for e in d["traceEvents"][:100] if "ts" in e], [[0, 1, 2]] * 3]), "memory timeline"),
    (lambda d: "<!DOCTYPE html><html><body>memory timeline</body></html>", "HTML"),
    (lambda d: dump(d).encode("utf-16"), "UTF-16"),
    (lambda d: dump(d).encode("utf-16-le"), "UTF-16"),
])
def test_not_a_trace_is_named(loaded, tmp_path, amp_doc, make, words):
    data = make(amp_doc)
    refused(loaded, write(tmp_path, "x.json", data), words)


@pytest.fixture
def loaded(fresh_db):
    ingest_file(fresh_db, LENET)
    return fresh_db


def test_corrupt_small_gzip_says_corrupt(loaded, tmp_path):
    data = bytearray(gzip.compress(gzip.decompress(LENET.read_bytes())))
    data[len(data) // 3: len(data) // 3 + 64] = bytes(64)
    msg = refused(loaded, write(tmp_path, "corrupt.json.gz", bytes(data)), "gzip stream is corrupt")
    assert "empty" not in msg


def test_deep_member_is_refused_in_ingest_and_in_the_lake(loaded, tmp_path, amp_doc):
    text = '{"deep": ' + "[" * 10000 + "]" * 10000 + ', "traceEvents": ' + dump(amp_doc["traceEvents"][:20]) + "}"
    p = write(tmp_path, "deep.json", text)
    refused(loaded, p, "nested too deep")
    out = cli("ingest", str(p), "--lake", str(tmp_path / "lake"))
    assert out.returncode == 1 and out.stdout == "" and "Traceback" not in out.stderr
    assert out.stderr.strip() == f"tracedb: error: {p}: not a trace: a member before traceEvents is nested too deep"


def test_malformed_json_is_located_in_the_users_file(loaded, tmp_path, amp_doc):
    text = dump(amp_doc)
    k = text.index('"name"', len(text) // 2)
    bad = text[:k] + "," + text[k:]
    msg = refused(loaded, write(tmp_path, "bad.json", bad), "malformed JSON")
    assert f"at byte {k} of the content" in msg and "events-0" not in msg


def test_pipe_and_fifo_are_refused_without_hanging(loaded, tmp_path):
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    signal.alarm(20)                    # a hang fails the test instead of blocking the suite
    try:
        refused(loaded, fifo, "is a pipe, not a regular file")
    finally:
        signal.alarm(0)


def test_symlink_loop_and_missing_file_say_what_they_are(loaded, tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.symlink_to(b)
    b.symlink_to(a)
    refused(loaded, a, "too many levels of symbolic links")
    refused(loaded, tmp_path / "none.json", "no such file")


def test_hash_thread_failure_refuses_instead_of_a_prefix_hash(tmp_path):
    """A hashing thread that dies (MemoryError under ulimit -v) must not leave the run
    with the hash of a prefix of its file."""
    class Failing:

        def update(self, chunk):
            raise MemoryError()
    plain = write(tmp_path, "plain.json", gzip.decompress(AMP_TRACE.read_bytes()))
    for src in (plain, AMP_TRACE):
        with workdir() as w:
            with pytest.raises(IngestError, match="out of memory"):
                tf = trace_json.split(str(src), w, Failing(), piece_bytes=1 << 20)
                tf.wait_hash()


def test_run_names_are_checked(loaded, tmp_path):
    for name, words in (("", "cannot be empty"), ("a/b", "cannot hold"), ("../../x", "cannot hold"),
                        (".hidden", "start with"), ("x" * 201, "at most")):
        refused(loaded, LENET, words, run=name)
    weird = tmp_path / "we\tird.json.gz"
    shutil.copy(DATA / "tf" / "cpu_async_lenet_bs64.json.gz", weird)
    assert ingest_file(loaded, weird).run == "we_ird"


# ---------------------------------------------------------------- ncu CSV

def _ncu_rows(path):
    with gzip.open(path, "rt", newline="") as f:
        return list(csv.reader(f))


def _ncu_write(tmp_path, name, table):
    buf = io.StringIO()
    csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(table)
    return write(tmp_path, name, buf.getvalue())


def test_ncu_reordered_columns_read_the_same(fresh_db, tmp_path):
    table = _ncu_rows(SMALL_RAW)
    order = list(range(len(table[0])))[::-1]            # every column reversed: ID last
    p = _ncu_write(tmp_path, "reordered.csv", [[r[i] for i in order] for r in table])
    a = ingest_file(fresh_db, SMALL_RAW)
    b = ingest_file(fresh_db, p)
    assert b.status == "loaded"
    q = "SELECT kernel_id, metric, value, unit FROM counters WHERE run = ? ORDER BY ALL"
    assert rows(fresh_db, q, [a.run]) == rows(fresh_db, q, [b.run]) and rows(fresh_db, q, [a.run])
    q = "SELECT kernel_id, name, dur_ns, grid_x, block_x FROM kernels WHERE run = ? ORDER BY ALL"
    assert rows(fresh_db, q, [a.run]) == rows(fresh_db, q, [b.run])


def test_ncu_without_units_row_is_refused(loaded, tmp_path):
    table = _ncu_rows(SMALL_RAW)
    refused(loaded, _ncu_write(tmp_path, "nounits.csv", [table[0]] + table[2:]), "without its units row")


def test_ncu_locale_numbers_are_refused(loaded, tmp_path):
    table = _ncu_rows(DATA / "ncu" / "h100_resnet50_bs64_amp_raw.csv.gz")

    def de(v):      # the German locale of ncu's own printing: 1,980,000 -> 1.980.000; 0.002912 -> 0,002912
        return v.replace(",", "\x00").replace(".", ",").replace("\x00", ".") if any(c.isdigit() for c in v) \
            and not v.startswith("(") else v
    head = len(table[0])
    body = [r[:11] + [de(v) for v in r[11:head]] for r in table[2:]]
    msg = refused(loaded, _ncu_write(tmp_path, "locale.csv", table[:2] + body), "locale format")
    assert "LC_ALL=C" in msg


def test_ncu_duplicate_kernel_id_is_refused(loaded, tmp_path):
    table = _ncu_rows(SMALL_RAW)
    refused(loaded, _ncu_write(tmp_path, "dup.csv", table + [table[3]]), f"kernel ID {table[3][0]} is on 2 rows")


def test_ncu_details_without_value_column_is_refused(loaded, tmp_path):
    table = _ncu_rows(SMALL_DETAILS)
    k = table[0].index("Metric Value")
    refused(loaded, _ncu_write(tmp_path, "novalue.csv", [r[:k] + r[k + 1:] for r in table]),
            "without its Metric Value column")


# ---------------------------------------------------------------- power logs

def test_nvidia_smi_in_milliwatts_reads_as_watts(fresh_db, tmp_path):
    """The real nvidia-smi log with its power columns printed in mW (values x1000):
    the same watts as the original."""
    text = gzip.decompress(SMI_UNITS.read_bytes()).decode()
    lines = text.splitlines()

    def mw(line):
        parts = line.split(", ")
        return ", ".join(f"{float(p[:-2]) * 1000:.0f} mW" if p.endswith(" W") else p for p in parts)
    p = write(tmp_path, "smi_mw.csv", "\n".join([lines[0].replace("[W]", "[mW]")] + [mw(l) for l in lines[1:]]) + "\n")
    a = ingest_file(fresh_db, SMI_UNITS, options={"tz": "UTC"})
    b = ingest_file(fresh_db, p, options={"tz": "UTC"})
    q = "SELECT ts_ns, round(power_w, 3), round(instant_power_w, 3) FROM power WHERE run = ? ORDER BY ts_ns"
    assert rows(fresh_db, q, [a.run]) == rows(fresh_db, q, [b.run])


@pytest.mark.parametrize("scale,fmt", [(10 ** 9, "{:d}"), (10 ** 9, "{:.6f}"), (10 ** 6, "{:d}")])
def test_sampler_timestamps_not_in_ns_are_refused(loaded, tmp_path, scale, fmt):
    text = SAMPLER.read_text().splitlines()
    out = [text[0]]
    for line in text[1:]:
        t, rest = line.split(",", 1)
        v = int(t) // scale if fmt == "{:d}" else int(t) / scale
        out.append(fmt.format(v) + "," + rest)
    refused(loaded, write(tmp_path, "secs_power.csv", "\n".join(out) + "\n"), "not epoch nanoseconds")


def test_sampler_timestamps_before_1970_are_refused(loaded, tmp_path):
    """The real sampler log moved before the epoch (each timestamp minus the last):
    refused, where it loaded and paired by nothing."""
    text = SAMPLER.read_text().splitlines()
    last = int(text[-1].split(",", 1)[0])
    out = [text[0]] + [f"{int(t) - last - 1},{rest}" for t, rest in (l.split(",", 1) for l in text[1:])]
    msg = refused(loaded, write(tmp_path, "old_power.csv", "\n".join(out) + "\n"), "before 1970")
    assert f"timestamp_ns holds '{int(text[1].split(',', 1)[0]) - last - 1}'" in msg


def test_sampler_log_with_a_cut_off_last_row(fresh_db, tmp_path):
    text = SAMPLER.read_text()
    cut = text.rstrip("\n")[:-9]                          # the last row loses its tail
    p = write(tmp_path, "cut_power.csv", cut)
    r, said = ingest_warned(fresh_db, p)
    assert said == [f"{p}: last line is cut off; it was dropped"]
    lines = text.splitlines()[1:-1]
    got = rows(fresh_db, "SELECT ts_ns, power_w FROM power WHERE run = ? ORDER BY ts_ns", [r.run])
    assert got == sorted((int(l.split(",")[0]), int(l.split(",")[1]) / 1e3) for l in lines)
    assert log_of(fresh_db, r.run) == ["last line is cut off; it was dropped"]


def test_pairing_a_power_log_with_an_untimed_trace_commits_nothing(fresh_db, tmp_path):
    """Done by the architecture refactor: ingest and pairing are one transaction."""
    p = write(tmp_path, "untimed.json", json.dumps({"traceEvents": [{"ph": "M", "name": "process_name", "pid": 1,
                                                                     "args": {"name": "x"}}]}))
    ingest_file(fresh_db, p)
    before = snapshot(fresh_db)
    msg = refused(fresh_db, SAMPLER, "no timed events", pair_with="untimed")
    assert "--pair-with 'untimed'" in msg and snapshot(fresh_db) == before


# ---------------------------------------------------------------- the database and tracedb sql

@pytest.mark.parametrize("name,data", [("data.csv", "a,b\n1,2\n"), ("t.json", '{"traceEvents": []}'),
                                       ("p.parquet", b"PAR1\x00\x00\x00\x00PAR1")])
def test_db_naming_a_data_file_is_refused(tmp_path, capsys, name, data):
    target = write(tmp_path, name, data)
    before = target.read_bytes()
    assert main(["ingest", str(LENET), "--db", str(target)]) == 1
    err = capsys.readouterr().err
    assert err.strip() == f"tracedb: error: {target}: not a DuckDB database (--db names the database file; " \
                          "give the data file as PATH of tracedb ingest)"
    assert target.read_bytes() == before


@pytest.fixture
def db_file(tmp_path):
    path = tmp_path / "s.duckdb"
    con = db.connect(path)
    ingest_file(con, LENET)
    con.close()
    return path


@pytest.mark.parametrize("sql,words", [
    ("COPY runs TO '{dir}/out.csv'", "disabled by configuration"),
    ("SELECT * FROM read_text('{dir}/secret.txt')", "disabled by configuration"),
    ("ATTACH '{dir}/other.duckdb' AS o (READ_WRITE); DELETE FROM o.t", "disabled by configuration"),
    ("ATTACH '{dir}/link.duckdb' AS l (READ_WRITE); DELETE FROM l.runs", "disabled by configuration"),
    ("INSTALL spatial", "disabled by configuration"),
    ("SET enable_external_access = true; SELECT * FROM read_text('{dir}/secret.txt')", "configuration has been locked"),
    ("DELETE FROM runs", "add --write"),
])
def test_sql_cannot_touch_other_files(db_file, tmp_path, capsys, sql, words):
    (tmp_path / "secret.txt").write_text("secret")
    other = db.connect(tmp_path / "other.duckdb")
    other.execute("CREATE TABLE t AS SELECT 1 AS a")
    other.close()
    os.link(db_file, tmp_path / "link.duckdb")
    assert main(["sql", sql.format(dir=tmp_path), "--db", str(db_file)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("tracedb: error: sql: ") and words in err
    assert not (tmp_path / "out.csv").exists()
    con = db.connect(tmp_path / "other.duckdb", read_only=True)
    assert scalar(con, "SELECT count(*) FROM t") == 1
    con.close()
    con = db.connect(db_file, read_only=True)
    assert scalar(con, "SELECT count(*) FROM runs") == 1
    con.close()


def test_sql_write_is_an_opt_in_for_this_database_only(db_file, tmp_path, capsys):
    assert main(["sql", "DELETE FROM ingest_log", "--db", str(db_file), "--write"]) == 0
    assert main(["sql", f"COPY runs TO '{tmp_path}/out.csv'", "--db", str(db_file), "--write"]) == 1
    assert not (tmp_path / "out.csv").exists()
    con = db.connect(db_file, read_only=True)
    assert scalar(con, "SELECT count(*) FROM ingest_log") == 0 and scalar(con, "SELECT count(*) FROM runs") == 1
    con.close()


def test_sql_empty_and_hints(db_file, capsys):
    assert main(["sql", "", "--db", str(db_file)]) == 1
    assert "empty query" in capsys.readouterr().err
    assert main(["sql", "  -- nothing\n", "--db", str(db_file)]) == 1
    assert "empty query" in capsys.readouterr().err
    assert main(["sql", "SELECT * FROM kernel", "--db", str(db_file)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and 'Did you mean "kernels"' in err


# ---------------------------------------------------------------- the lake

def test_lake_paths_of_hostile_run_names_stay_inside(tmp_path):
    """A database made elsewhere may carry any run name: one that cannot be a lake path
    (a separator, a leading dot) is refused before anything is written, in one line
    naming it, and nothing lands outside the lake; the other runs export with --run."""
    from tracedb.query import lake
    con = db.connect(tmp_path / "h.duckdb")
    ingest_file(con, LENET)
    names = ["../../../escape", str(tmp_path / "abs"), "a/b", ".", ".."]
    for n in names:     # as a foreign database could hold them (tracedb itself refuses them now)
        con.execute("INSERT INTO runs SELECT * REPLACE (? AS run, ? AS content_hash) FROM runs "
                    "WHERE run = 'cpu_sync_lenet_bs64'", [n, n])
        con.execute("INSERT INTO events SELECT * REPLACE (? AS run) FROM events WHERE run = 'cpu_sync_lenet_bs64'", [n])
    root = tmp_path / "deep" / "er"
    before = set(os.listdir(tmp_path))
    with pytest.raises(lake.LakeError, match="cannot be a lake partition .*nothing was written") as e:
        lake.export(con, root / "lake")
    assert any(repr(n) in str(e.value) for n in names) and "\n" not in str(e.value)
    assert set(os.listdir(tmp_path)) - {"deep"} == before and not (tmp_path / "abs.json").exists()
    assert not (root / "lake" / "_runs").exists() or not list((root / "lake" / "_runs").iterdir())
    assert lake.export(con, root / "lake", ["cpu_sync_lenet_bs64"]) == ["cpu_sync_lenet_bs64"]
    recs = {json.loads(p.read_text())["run"] for p in (root / "lake" / "_runs").iterdir()}
    assert recs == {"cpu_sync_lenet_bs64"}
    assert set(os.listdir(tmp_path)) - {"deep"} == before


def test_export_to_a_file_is_one_line(db_file, tmp_path, capsys):
    f = write(tmp_path, "lake", "not a dir")
    assert main(["export", "--db", str(db_file), "--lake", str(f)]) == 1
    assert capsys.readouterr().err == f"tracedb: error: export: {f}: is a file, not a lake directory\n"


# ---------------------------------------------------------------- the ingest log and the CLI's warnings

def test_ingest_log_report_holds_what_the_cli_printed(tmp_path, amp_doc):
    doc = copy.deepcopy(amp_doc)
    next(e for e in doc["traceEvents"] if e.get("cat") == "kernel")["dur"] = -1
    p = write(tmp_path, "warned.json", dump(doc))
    dbp = tmp_path / "w.duckdb"
    r = cli("ingest", str(p), str(SAMPLER), "--db", str(dbp))
    assert r.returncode == 0, r.stderr
    warned = [l for l in r.stderr.splitlines() if l.startswith("tracedb: warning: ")]
    assert warned == [f"tracedb: warning: {p}: 1 events have a negative duration; it was dropped (dur NULL) "
                      "(first: " + repr(next(e for e in doc["traceEvents"] if e.get("cat") == "kernel")["name"]) + ")"]
    con = db.connect(dbp, read_only=True)
    log = reports.run(con, "ingest_log", {}).to_pylist()
    # the power log (paired with the trace by the same command) logs only what was done
    assert {x["level"] for x in log if x["run"] == "h100_resnet50_bs64_amp_power"} == {"info"}
    log = [x for x in log if x["run"] == "warned"]
    assert [x["level"] for x in log] == ["info", "warning"]
    assert log[1]["message"] == warned[0].split(f"{p}: ", 1)[1] and log[1]["path"] == str(p)
    assert log[0]["message"].startswith(f"loaded as a trace run: {len(doc['traceEvents'])} events")
    assert reports.run(con, "ingest_log", {"run": "warned", "level": "warning"}).num_rows == 1
    con.close()


def _big_trace(tmp_path, amp_doc, copies):
    """The real trace's events repeated (for a load that lasts long enough to interrupt)."""
    evs = amp_doc["traceEvents"]
    p = tmp_path / "big.json"
    with open(p, "w") as f:
        f.write('{"traceEvents": [')
        for c in range(copies):
            f.write(("," if c else "") + ",".join(dump(e) for e in evs))
        f.write("]}")
    return p


@pytest.mark.parametrize("sig,code,word", [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")])
def test_interrupted_ingest_rolls_back_and_cleans_up(tmp_path, amp_doc, sig, code, word):
    big = _big_trace(tmp_path, amp_doc, 30)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    dbp = tmp_path / "i.duckdb"
    env = dict(os.environ, TMPDIR=str(tmp))
    proc = subprocess.Popen([sys.executable, "-m", "tracedb.cli", "ingest", str(LENET), str(big), "--db", str(dbp)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    def copying_big():      # the big trace's event array is being read through its pipes
        try:
            return any(n.startswith("pipe-") for d in os.listdir(tmp) for n in os.listdir(tmp / d))
        except OSError:     # a work directory removed between the two listings
            return False
    deadline = time.time() + 60
    while time.time() < deadline and not copying_big():
        time.sleep(0.02)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == code, (out, err)
    assert err.strip().splitlines()[-1] == f"tracedb: {word}" and "Traceback" not in err
    assert os.listdir(tmp) == []
    con = db.connect(dbp, read_only=True)
    assert [r[0] for r in rows(con, "SELECT run FROM runs")] == ["cpu_sync_lenet_bs64"]
    con.close()


def test_killed_runs_leave_nothing_behind_for_long(tmp_path, amp_doc):
    """kill -9 during an ingest leaves its copy of the event array in $TMPDIR; the next
    ingest removes it, and never the work directory of a run still alive."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = dict(os.environ, TMPDIR=str(tmp))
    holder = ("import sys, time; from tracedb.ingest.workdir import workdir\n"
              "with workdir() as d:\n    open(d + '/events-00000.json', 'wb').write(b'x' * 4096)\n"
              "    print(d, flush=True); time.sleep(120)\n")
    killed = subprocess.Popen([sys.executable, "-c", holder], stdout=subprocess.PIPE, text=True, env=env)
    alive = subprocess.Popen([sys.executable, "-c", holder], stdout=subprocess.PIPE, text=True, env=env)
    dead_dir, live_dir = killed.stdout.readline().strip(), alive.stdout.readline().strip()
    killed.kill()
    killed.wait()
    assert os.path.exists(dead_dir + "/events-00000.json")
    r = cli("ingest", str(LENET), "--db", str(tmp_path / "k.duckdb"), {"TMPDIR": str(tmp)})
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(tmp)) == [os.path.basename(live_dir)]
    alive.kill()
    alive.wait()


def test_file_size_limit_is_one_line(tmp_path, amp_doc):
    """ulimit -f: a file the ingest writes cannot grow (EFBIG): the database's log
    (an uncompressed trace goes through pipes, no temporary copy)."""
    import resource
    p = write(tmp_path, "plain.json", gzip.decompress(AMP_TRACE.read_bytes()))
    dbp = tmp_path / "f.duckdb"
    con = db.connect(dbp)
    con.close()
    limit = 1 << 20

    def lower():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    r = subprocess.run([sys.executable, "-m", "tracedb.cli", "ingest", str(p), "--db", str(dbp)],
                       capture_output=True, text=True, preexec_fn=lower)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith(f"tracedb: error: {p}: ") and "File too large" in line and "ulimit -f" in line
    con = db.connect(dbp, read_only=True)
    assert scalar(con, "SELECT count(*) FROM runs") == 0
    con.close()


def test_full_disk_under_the_database_is_one_line_and_keeps_what_was_there(tmp_path):
    """A 10 MB tmpfs holds the database (a new file is a 4.7 MB copy of the schema's
    template, store/template.py: built, it takes that room at its first checkpoint
    only, and a 7 MB tmpfs held it): the second trace does not fit. Its ingest fails
    with one line naming the cause (it was "cannot rollback - no transaction is
    active"), the run before it stays, and the next file that fits still loads."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=10m", "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("cannot mount a small tmpfs here (needs root)")
    try:
        dbp = mnt / "d.duckdb"
        traces = [DATA / "torch" / f"h100_{n}.json.gz" for n in ("resnet50_bs64_amp", "bert_bs16_amp",
                                                                "resnet50_bs64_fp32")]
        r = cli("ingest", *map(str, traces), "--db", str(dbp))
        assert r.returncode == 1 and "Traceback" not in r.stderr
        (line,) = r.stderr.strip().splitlines()
        assert line.startswith(f"tracedb: error: {traces[1]}: database error while loading") \
            and "No space left on device" in line and line.endswith("nothing was loaded")
        con = db.connect(dbp, read_only=True)
        assert [x[0] for x in rows(con, "SELECT run FROM runs ORDER BY run")] == \
            ["h100_resnet50_bs64_amp", "h100_resnet50_bs64_fp32"]
        con.close()
    finally:
        subprocess.run(["umount", str(mnt)])
