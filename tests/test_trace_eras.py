"""Kineto traces of other eras: old categories, 'stream N' tids, epoch µs with ns decimals."""
import json

import pytest

from tracedb.store.sql import rows, scalar
from tracedb.ingest import ingest_file

OLD = [
    {"ph": "X", "cat": "Operator", "name": "ProfilerStep#7", "pid": 11, "tid": 11,
     "ts": 1655992512000000, "dur": 900},
    {"ph": "X", "cat": "Operator", "name": "aten::add", "pid": 11, "tid": 11, "ts": 1655992512000100, "dur": 50},
    {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 11, "tid": 11, "ts": 1655992512000110,
     "dur": 10, "args": {"correlation": 5, "external id": 9}},
    {"ph": "X", "cat": "Kernel", "name": "add_kernel", "pid": 0, "tid": "stream 7", "ts": 1655992512000200,
     "dur": 30, "args": {"correlation": 5, "device": 0, "grid": [4, 1, 1], "block": [256, 1, 1]}},
]


def test_old_categories_and_integer_epoch_us(fresh_db, tmp_path):
    p = tmp_path / "old.json"
    p.write_text(json.dumps(OLD))                       # bare array form
    r = ingest_file(fresh_db, p)
    k = rows(fresh_db, """SELECT kind, stream, device, launch_name, op_name, iteration, ts_ns, grid_x, block_x
                          FROM kernels WHERE run = ?""", [r.run])
    assert k == [("kernel", 7, 0, "cudaLaunchKernel", "aten::add", 7, 1655992512000200000, 4, 256)]
    assert rows(fresh_db, "SELECT start_ns, end_ns FROM iterations WHERE run = ?", [r.run]) == \
        [(1655992512000000000, 1655992512000900000)]
    assert scalar(fresh_db, "SELECT external_id FROM events WHERE run = ? AND cat = 'Runtime'", [r.run]) == 9


@pytest.mark.parametrize("values, want", [
    # 19 significant digits: a double cannot hold these to the nanosecond
    ([("1700000000123456.789", "1.001"), ("1700000000123457.001", "0.999")],
     [(1700000000123456789, 1001), (1700000000123457001, 999)]),
    # at 1.7e15 µs doubles are 0.25 µs apart: .001 and .999 read as whole numbers, so
    # no fraction shows the ns were lost; every value from 2^44 µs is read again as
    # text, and a fraction there goes the exact path
    ([("1700000000123456.001", "1"), ("1700000000123457.999", "2")],
     [(1700000000123456001, 1000), (1700000000123457999, 2000)]),
], ids=["fractions", "fractions that round to whole doubles"])
def test_float_epoch_us_keeps_nanoseconds(fresh_db, tmp_path, values, want):
    events = ",\n".join(f'{{"ph": "X", "cat": "cpu_op", "name": "{n}", "pid": 1, "tid": 1, "ts": {ts}, "dur": {dur}}}'
                         for n, (ts, dur) in zip("ab", values))
    p = tmp_path / "epoch.json"
    p.write_text('{"traceEvents": [\n' + events + '\n]}')
    r = ingest_file(fresh_db, p)
    assert rows(fresh_db, "SELECT ts_ns, dur_ns FROM events WHERE run = ? ORDER BY event_id", [r.run]) == want


def test_integer_epoch_us_stays_off_the_exact_path(fresh_db, tmp_path, monkeypatch):
    """Whole epoch µs (integer literals) are exact as DuckDB reads them as text: the
    slow exact path (Python, event by event) is not needed."""
    from tracedb.ingest import trace_json

    def no(*a, **k):
        raise AssertionError("the exact path read the trace")
    monkeypatch.setattr(trace_json, "exact_batches", no)
    p = tmp_path / "old.json"
    p.write_text(json.dumps({"traceEvents": OLD}))
    r = ingest_file(fresh_db, p)
    assert rows(fresh_db, "SELECT ts_ns FROM events WHERE run = ? ORDER BY event_id", [r.run]) == \
        [(e["ts"] * 1000,) for e in OLD]
