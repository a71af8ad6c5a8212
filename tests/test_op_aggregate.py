"""benchmarks/op_aggregate.sql prices storing the ops report's per-iteration rows at ingest
(docs/benchmarks.md, "Reports with iteration=all"): what it prices must be those rows.
Read back as the report would (each iteration's rows, and the whole trace as their sum
with the calls outside every iteration), it gives the live report's rows with
iteration=all, on real traces with step markers and without."""
import importlib.util
from pathlib import Path

import pytest

from conftest import DATA
from tracedb.store import db
from tracedb.store.sql import statements
from tracedb.query import reports
from tracedb.ingest import ingest_file

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
TRACES = [DATA / "torch" / "h100_resnet50_bs64_amp.json.gz", DATA / "flops" / "h100_gpt2_bs8_amp.json.gz",
          DATA / "cupti" / "a100_cupti_range_profiler.json.gz"]        # the last: no step markers


def _bench():
    spec = importlib.util.spec_from_file_location("bench_op_aggregate", BENCH / "bench_op_aggregate.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name.split(".")[0])
def test_aggregate_gives_the_reports_rows(tmp_path, path):
    con = db.connect(tmp_path / "a.duckdb")
    run = ingest_file(con, path).run
    for stmt in statements((BENCH / "op_aggregate.sql").read_text()):
        con.execute(stmt, {"run": run} if "$run" in stmt else None)
    stored = sorted(map(tuple, con.execute(_bench()._FROM_TABLE).fetchall()), key=repr)
    live = sorted((tuple(r.values()) for r in reports.run(con, "ops", {"run": run, "iteration": "all"}).to_pylist()),
                  key=repr)
    assert len(live) > 50 and stored == live
    con.close()
