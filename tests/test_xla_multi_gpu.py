"""A jitted JAX step on two GPUs of one host (tests/data/jax_multi): the collectives XLA
lowers to NCCL are typed communication and counted per kind as the raw trace holds
them, and the findings on it state what they measure (no finding with an empty
evidence, no what-if prediction where the step's critical path never reaches the GPU)."""
import gzip
import json
import re
from collections import Counter

import pytest

from tracedb.analysis import advise
from tracedb.ingest import ingest_file
from tracedb.query import reports
from tracedb.store import db
from tests.conftest import DATA

TRACE = DATA / "jax_multi" / "h200x2_jax_collectives.trace.json.gz"
KIND = {"AllReduce": "allreduce", "AllGather": "allgather", "ReduceScatter": "reducescatter",
        "SendRecv": "sendrecv"}


@pytest.fixture(scope="module")
def xdb(tmp_path_factory):
    con = db.connect(tmp_path_factory.mktemp("xla") / "x.duckdb")
    ingest_file(con, TRACE, run="jax2")
    yield con
    con.close()


def raw_gpu_kernels():
    """(device, name) of every GPU event of the raw trace: the events of the
    '/device:GPU:N' processes."""
    with gzip.open(TRACE, "rt") as f:
        ev = json.load(f)["traceEvents"]
    gpus = {e["pid"] for e in ev if e.get("ph") == "M" and e.get("name") == "process_name"
            and e["args"]["name"].startswith("/device:GPU:")}
    return [(e["pid"], e["name"]) for e in ev if e.get("ph") == "X" and e["pid"] in gpus]


def test_nccl_kernels_under_xla_are_communication_and_nothing_else(xdb):
    raw = raw_gpu_kernels()
    nccl = Counter(n for _, n in raw if n.startswith("ncclDevKernel_"))
    assert sum(nccl.values()) == 64 and len(nccl) == 5       # f32 and bf16 all-reduce, gather, scatter, permute
    typed = Counter(dict(xdb.execute(
        "SELECT k.name, count(*) FROM kernels k JOIN kernel_layers l USING (run, kernel_id) "
        "WHERE l.layer_type = 'communication' GROUP BY 1").fetchall()))
    assert typed == nccl
    assert xdb.execute("SELECT count(*) FROM kernels").fetchone()[0] == len(raw) == 600


def test_collectives_per_kind_equal_the_raw_nccl_kernels(xdb):
    raw = Counter(KIND[re.match(r"ncclDevKernel_([A-Za-z]+?)(_|\()", n).group(1)]
                  for _, n in raw_gpu_kernels() if n.startswith("ncclDevKernel_"))
    rows = reports.run(xdb, "collectives", {"run": "jax2", "iteration": "all"}).to_pylist()
    whole = {r["collective"]: r["calls"] for r in rows if r["iteration"] is None}
    assert whole == dict(raw) == {"allreduce": 40, "allgather": 8, "reducescatter": 8, "sendrecv": 8}
    # each of the 4 profiled steps runs the same program: the same calls in every iteration
    per = {(r["iteration"], r["collective"]): r["calls"] for r in rows if r["iteration"] is not None}
    assert {it for it, _ in per} == {0, 1, 2, 3}
    assert all(per[(it, c)] == n // 4 for it in range(4) for c, n in raw.items())


def test_findings_on_the_xla_step_state_what_they_measure(xdb):
    found = [f for f in advise.evaluate(xdb, "jax2", 1) if f["severity"] in ("high", "medium", "low")]
    assert found and all(f["evidence"] for f in found)
    comm = next(f for f in found if f["rule"] == "low_comm_overlap")
    assert "on the run's GPUs" in comm["evidence"]
    # the host's wait on the GPU has no call in an XLA trace: the path stays on the host,
    # so no replay may price the communication (it would call any GPU change free)
    assert "saving_ns" not in comm and "no what_if prediction" in comm["evidence"]


def test_the_critical_path_names_the_host_wait_the_trace_does_not_show(xdb):
    """No synchronize call marks XLA's wait for the GPU: the path's last host range
    is split where the step's last GPU work ended, and the part before is a named gap
    (unknown dependency, missing_edge sync), not CPU time."""
    rows = reports.run(xdb, "critical_path", {"run": "jax2", "iteration": "1"}).to_pylist()
    gaps = [r for r in rows if r["category"] == "unknown dependency"]
    assert [g["missing_edge"] for g in gaps] == ["sync"]
    last_gpu_end = xdb.execute(
        "SELECT max(k.ts_ns + k.dur_ns) FROM kernels k JOIN iterations i USING (run, iteration) "
        "WHERE k.run = 'jax2' AND k.iteration = 1 AND k.ts_ns + k.dur_ns <= i.end_ns").fetchone()[0]
    assert gaps[0]["start_ns"] + gaps[0]["dur_ns"] == last_gpu_end
    assert sum(r["dur_ns"] for r in rows) == rows[0]["step_ns"]
