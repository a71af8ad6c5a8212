"""The derivation (schema/load/derive_trace.sql) rewritten for speed derives exactly
what the landed one did: every table an ingest writes (kernels, iterations, threads,
activity_args, collectives, memory_events, counters, events, ...) is compared row
for row, and the kernels also in the order they were written (launch order, which
decides the order in which reports add floating-point values), between an ingest with
the current script and one with the script as it was before the change
(tests/derive_before/derive_trace.sql, a frozen copy of the landed script).

The fixtures cover Kineto (three H100 models, CUDA graphs, CUPTI range-profiler
counters, DDP collectives, [memory] events), XProf (TensorFlow, JAX: GPU rows found
through the stream threads' names, step_num markers), a named iteration marker, GPU
activity linked to its launch only by ac2g flows, and the Nsight Systems exports of
tests/data/nsys (several nsys versions, NVTX ranges as ops, two GPUs)."""
import gzip
import json
from pathlib import Path

import pytest

from conftest import DATA, TRACES
from tracedb.store import db
from tracedb.store.sql import rows, run_script
from tracedb.ingest import ingest_file, nsys, trace

BEFORE = Path(__file__).parent / "derive_before" / "derive_trace.sql"

CASES = [(p, None) for p in TRACES] + [
    (DATA / "torch_graph" / "h100_cuda_graph_threads.json.gz", None),
    (DATA / "torch_graph" / "h100_cuda_graph_threads.json.gz", "train_iter"),
    (DATA / "cupti" / "a100_cupti_range_profiler.json.gz", None),
    (DATA / "dist" / "ddp" / "rank0.json.gz", None),
    (DATA / "capture_h100" / "resnet18_bs32" / "resnet18_bs32.pt.trace.json.gz", None),
    (DATA / "jax" / "h200_jax_mlp.trace.json.gz", None),
    ("ac2g", None),
] + [(DATA / "nsys" / f"{n}.sqlite.gz", None)       # (the other exports there are refused: no CUDA activity)
      for n in ("h100_2gpu_1s", "healthy_1pct", "mfu_2gpu_before", "mock", "wb2_report1")]


def _ac2g_trace(tmp_path):
    """The BERT fixture with args.correlation removed from its GPU activity and
    launches: only the ac2g flows link them (tests/test_safety_silent.py does the same)."""
    with gzip.open(DATA / "torch" / "h100_bert_bs16_amp.json.gz", "rt") as f:
        doc = json.load(f)
    for e in doc["traceEvents"]:
        if isinstance(e.get("args"), dict):
            e["args"].pop("correlation", None)
    out = tmp_path / "ac2g.json"
    out.write_text(json.dumps(doc))
    return out


def _tables(con):
    """Every table of the database, its rows sorted (TIMESTAMP columns, which say when
    a run was loaded, left out); and the kernels as written, in storage order."""
    out = {}
    for (oid, t) in rows(con, "SELECT table_oid, table_name FROM duckdb_tables() WHERE NOT temporary ORDER BY 2"):
        cols = [c for (c,) in rows(con, "SELECT column_name FROM duckdb_columns() WHERE table_oid = ? "
                                        "AND data_type NOT LIKE 'TIMESTAMP%' ORDER BY column_index", [oid])]
        sel = ", ".join(f'CAST("{c}" AS VARCHAR)' for c in cols)
        out[t] = rows(con, f'SELECT {sel} FROM "{t}" ORDER BY ALL')
    out["kernels, as stored"] = rows(con, "SELECT kernel_id, seq FROM kernels ORDER BY rowid")
    return out


def _ingest(path, dbpath, marker):
    con = db.connect(dbpath)
    try:
        ingest_file(con, path, run="r", options={"iterations_from": marker} if marker else None)
        return _tables(con)
    finally:
        con.close()


@pytest.mark.parametrize("path,marker", CASES, ids=lambda v: v if isinstance(v, str) or v is None else v.name)
def test_derivation_equals_the_landed_one(path, marker, tmp_path, monkeypatch):
    if path == "ac2g":
        path = _ac2g_trace(tmp_path)
    after = _ingest(path, tmp_path / "after.duckdb", marker)
    with monkeypatch.context() as m:       # the landed derivation, frozen
        for mod in (trace, nsys):
            real = mod.sql_text
            m.setattr(mod, "sql_text", lambda kind, name, real=real: BEFORE.read_text()
                      if name == "load/derive_trace.sql" else real(kind, name))
        # (an Nsight Systems run's derivation as it was, whole: today's nsys_gpu.sql, which
        # stands for the _gpu statement, reads the view and macro the frozen script lacks)
        m.setattr(nsys, "_derive", lambda con, run: run_script(con, BEFORE.read_text(), {"run": run}))
        before = _ingest(path, tmp_path / "before.duckdb", marker)
    assert before.keys() == after.keys()
    assert before["events"] and before["threads"]
    assert before["kernels"] or Path(path).name.startswith("cpu_"), "a fixture with GPU activity"
    assert BEFORE.read_text() != (Path(trace.__file__).parents[1] / "schema/load/derive_trace.sql").read_text()
    for t in before:
        assert after[t] == before[t], t
