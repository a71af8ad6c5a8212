"""The derivation's per-event part run on each staged batch (ingest/trace.py,
schema/load/derive_trace.sql part 1) derives exactly what the landed derivation
derived from the loaded events: every table a trace ingest writes (kernels,
iterations, threads, activity_args, collectives, memory_events, counters, events,
...) is compared row for row between

- the new path, in many small batches (pieces of 128 KB, 4 KB for the smallest
  fixtures, a batch per piece, at most 1,000 rows a batch), so that ops, launches and their kernels, and the
  markers fall in different batches; and
- the derivation as it was before the change (tests/derive_before/derive_trace.sql,
  a frozen copy of the landed script) run once over the events table after a
  load in one batch.

The fixtures cover Kineto (three H100 models, CUDA graphs, CUPTI range-profiler
counters, DDP collectives, [memory] events), XProf (TensorFlow, JAX: GPU rows found
through the stream threads' names, step_num markers), a named iteration marker,
and GPU activity linked to its launch only by ac2g flows (where the events get their
correlation after the load, and part 1 reads the events table again)."""
import gzip
import json
from pathlib import Path

import pytest

from conftest import DATA, TRACES
from tracedb.store import db
from tracedb.store.sql import rows
from tracedb.ingest import ingest_file, trace, trace_json

BEFORE = Path(__file__).parent / "derive_before" / "derive_trace.sql"

CASES = [(p, None) for p in TRACES] + [
    (DATA / "torch_graph" / "h100_cuda_graph_threads.json.gz", None),
    (DATA / "torch_graph" / "h100_cuda_graph_threads.json.gz", "train_iter"),
    (DATA / "cupti" / "a100_cupti_range_profiler.json.gz", None),
    (DATA / "dist" / "ddp" / "rank0.json.gz", None),
    (DATA / "capture_h100" / "resnet18_bs32" / "resnet18_bs32.pt.trace.json.gz", None),
    (DATA / "jax" / "h200_jax_mlp.trace.json.gz", None),
    ("ac2g", None),
]

# Columns that say when a run was loaded, not what it holds: every TIMESTAMP.


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
    """Every table of the database, its rows sorted, volatile columns left out."""
    out = {}
    for (oid, t) in rows(con, "SELECT table_oid, table_name FROM duckdb_tables() WHERE NOT temporary ORDER BY 2"):
        cols = [c for (c,) in rows(con, "SELECT column_name FROM duckdb_columns() WHERE table_oid = ? "
                                        "AND data_type NOT LIKE 'TIMESTAMP%' ORDER BY column_index", [oid])]
        sel = ", ".join(f'CAST("{c}" AS VARCHAR)' for c in cols)
        out[t] = rows(con, f'SELECT {sel} FROM "{t}" ORDER BY ALL')
    return out


def _ingest(path, dbpath, marker):
    con = db.connect(dbpath)
    try:
        ingest_file(con, path, run="r", options={"iterations_from": marker} if marker else None)
        return _tables(con)
    finally:
        con.close()


@pytest.mark.parametrize("path,marker", CASES, ids=lambda v: v if isinstance(v, str) or v is None else v.name)
def test_per_batch_derivation_equals_the_landed_one(path, marker, tmp_path, monkeypatch):
    if path == "ac2g":
        path = _ac2g_trace(tmp_path)
    with monkeypatch.context() as m:       # the derivation before, once, after a load in one batch
        real = trace.sql_text
        m.setattr(trace, "sql_text", lambda kind, name: BEFORE.read_text() if name == "load/derive_trace.sql"
                  else real(kind, name))
        m.setattr(trace, "DERIVE_PER_BATCH", False)
        before = _ingest(path, tmp_path / "before.duckdb", marker)
    batches = []
    real_derive = trace._derive_batch
    monkeypatch.setattr(trace, "_derive_batch", lambda *a: (batches.append(a[1].num_rows), real_derive(*a)))
    small = Path(path).stat().st_size < 100 << 10       # (a few hundred events: pieces of 4 KB)
    monkeypatch.setattr(trace_json, "PIECE_BYTES", 4 << 10 if small else 128 << 10)
    monkeypatch.setattr(trace_json, "TAIL", 1 << 10 if small else 16 << 10)
    monkeypatch.setattr(trace, "BATCH_BYTES", 1)
    monkeypatch.setattr(trace, "BATCH_ROWS", 1000)
    monkeypatch.setattr(trace, "FIRST_BATCH_BYTES", 0)
    after = _ingest(path, tmp_path / "after.duckdb", marker)
    n_events = len(after["events"])
    assert sum(batches) == n_events and len(batches) >= 2, batches
    assert before.keys() == after.keys()
    assert before["events"] and before["threads"]
    for t in before:
        assert after[t] == before[t], t
