"""A what-if never predicts a step shorter than its GPU work allows: the kernels of
one stream run one after another, also where the trace shows the next one starting a
few ns before the last one ended (ResNet-50 on an H100: 22 such pairs in its step,
which once let zero_launch_overhead run the stream's kernels side by side and predict
10.2 ms for a step holding 24.0 ms of kernels)."""
import gzip
import json
from collections import defaultdict

import pytest

from tracedb.ingest import ingest_file
from tracedb.query import reports
from tracedb.store import db
from tests.conftest import AMP_TRACE


@pytest.fixture(scope="module")
def rdb(tmp_path_factory):
    con = db.connect(tmp_path_factory.mktemp("wib") / "r.duckdb")
    ingest_file(con, AMP_TRACE, run="amp")
    yield con
    con.close()


def busiest_stream_ns(lo_ns, hi_ns):
    """The most GPU time one stream holds inside [lo, hi), from the raw JSON (µs to ns)."""
    with gzip.open(AMP_TRACE, "rt") as f:
        doc = json.load(f)
    base = int(doc.get("baseTimeNanoseconds", 0))
    per = defaultdict(int)
    for e in doc["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            ts = base + round(float(e["ts"]) * 1000)
            if lo_ns <= ts < hi_ns:
                per[(e["pid"], e["tid"])] += round(float(e["dur"]) * 1000)
    return max(per.values())


@pytest.mark.parametrize("params", [{"zero_launch_overhead": "true"}, {"remove_syncs": "true"},
                                    {"remove_cpu_like": "%"}])
def test_no_prediction_below_the_streams_serial_gpu_time(rdb, params):
    row = reports.run(rdb, "what_if", {"run": "amp", **params}).to_pylist()[0]
    lo, hi = rdb.execute("SELECT start_ns, end_ns FROM iterations WHERE run = 'amp' AND iteration = ?",
                         [row["iteration"]]).fetchone()
    serial = busiest_stream_ns(lo, hi)
    assert serial > 20_000_000                      # 24 ms of kernels on one stream
    assert serial <= row["predicted_step_ns"] <= row["step_ns"]
