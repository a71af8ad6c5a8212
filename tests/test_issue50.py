"""Issue 50: findings a user acts on, checked on real H200 captures (tests/data/graph_h200)
against values computed independently from the raw files."""
import gzip
import json
from decimal import Decimal

import pytest

from tracedb import db
from tracedb.ingest import ingest_file
from tests.conftest import DATA
from tests.independent import ns

G = DATA / "graph_h200"
GRAPH_TRAIN = G / "h200_graph_train.json.gz"
GRAPH_DECODE = G / "h200_graph_decode.json.gz"
JAX = G / "h200_jax_bf16_mlp.trace.json.gz"
DDP0 = DATA / "dist" / "ddp" / "rank0.json.gz"


def load(path):
    with gzip.open(path, "rt") as f:
        return json.load(f, parse_float=Decimal)


def dur_ns(e):
    return int(Decimal(str(e["dur"])) * 1000)


@pytest.fixture(scope="module")
def gdb(tmp_path_factory):
    con = db.connect(tmp_path_factory.mktemp("i50") / "g.duckdb")
    ingest_file(con, GRAPH_TRAIN, run="gtrain")
    ingest_file(con, GRAPH_DECODE, run="gdecode")
    ingest_file(con, JAX, run="jax")
    ingest_file(con, DDP0, run="ddp0")
    yield con
    con.close()


# -- layer types of XLA and NCCL kernels ---------------------------------------------------

def test_xla_convert_fusions_are_not_convolution_and_nccl_is_communication(gdb):
    jax_doc, ddp_doc = load(JAX), load(DDP0)
    convert = [e for e in jax_doc["traceEvents"] if e.get("ph") == "X" and "convert" in str(e.get("name"))
               and e.get("pid") == 1]  # pid 1: /device:GPU:0
    nccl = [e for e in ddp_doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "kernel"
            and str(e.get("name")).startswith("ncclDevKernel")]
    assert convert and nccl
    got = dict(gdb.execute(
        "SELECT l.layer_type, sum(k.dur_ns) FROM kernels k JOIN kernel_layers l USING (run, kernel_id) "
        "WHERE k.run = 'jax' AND k.name LIKE '%convert%' GROUP BY 1").fetchall())
    assert set(got) == {"elementwise/activation"}
    assert abs(got["elementwise/activation"] - sum(dur_ns(e) for e in convert)) <= len(convert)  # ns rounding
    comm = gdb.execute("SELECT count(*) FILTER (l.layer_type = 'communication'), count(*) FROM kernels k "
                       "JOIN kernel_layers l USING (run, kernel_id) WHERE k.run = 'ddp0' "
                       "AND k.name LIKE 'ncclDevKernel%'").fetchone()
    assert comm == (len(nccl), len(nccl))
    # no convolution anywhere in either (neither has one)
    assert gdb.execute("SELECT count(*) FROM kernel_layers WHERE run IN ('jax', 'ddp0') "
                       "AND layer_type = 'convolution'").fetchone()[0] == 0
