"""tracedb.capture on a GPU machine: a small CNN trained under the capture API,
checked against PyTorch's own allocator statistics and NVML's device memory.
Skipped without torch and CUDA (the CPU tests use tests/data/capture_h100/, which
capture_resnet.py wrote on an H100)."""
import json

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

import tracedb  # noqa: E402
from tracedb.store import db  # noqa: E402


def _train(cap, seen):
    import torch.nn as nn
    model = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 32, 3, padding=1),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(16, 3, 64, 64), torch.randint(0, 10, (16,))
    while not cap.done:
        if cap.n == cap.wait + cap.warmup:      # first active step: start torch's own peak counters
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        loss = nn.functional.cross_entropy(model(x.cuda()), y.cuda())
        opt.zero_grad()
        loss.backward()
        opt.step()
        cap.step()
    torch.cuda.synchronize()
    seen["alloc"] = torch.cuda.max_memory_allocated()
    seen["reserved"] = torch.cuda.max_memory_reserved()


def test_capture_api_writes_a_paired_database(tmp_path, capsys):
    seen = {}
    with tracedb.capture(tmp_path / "cap", steps=3, warmup=1, wait=1, batch_size=16, run="small") as cap:
        _train(cap, seen)
    out = capsys.readouterr().out
    assert "captured run small" in out and "peak_allocated_bytes" in out
    con = db.connect(tmp_path / "cap" / "tracedb.duckdb", read_only=True)
    runs = dict(con.execute("SELECT kind, run FROM runs").fetchall())
    assert runs == {"trace": "small", "power": "small_power", "host": "small_host"}
    # the memory events' peaks are the allocator's own peaks over the active steps
    alloc, reserved = con.execute("SELECT max(allocated_bytes), max(reserved_bytes) FROM memory_events "
                                  "WHERE device_type = 'cuda'").fetchone()
    assert alloc == seen["alloc"] and reserved == seen["reserved"]
    assert [r[0] for r in con.execute("SELECT iteration FROM iterations ORDER BY 1").fetchall()] == [2, 3, 4]
    # NVML's memory used (all of the process, CUDA context included) is above what the allocator holds
    used = con.execute("SELECT max(mem_used_bytes) FROM gpu_samples").fetchone()[0]
    assert used > reserved
    m = json.loads(con.execute("SELECT metadata FROM runs WHERE run = 'small'").fetchone()[0])
    cap_meta = m["tracedb_capture"]
    cap_meta = json.loads(cap_meta) if isinstance(cap_meta, str) else cap_meta
    assert m["batch_size"] == "16" and cap_meta["ncu_step"] == 4
    con.close()
    t = tracedb.connect(tmp_path / "cap" / "tracedb.duckdb", read_only=True)
    # the samplers ran around the whole profiled window (the small model's steps may all
    # fit between two samples: the reports' values are checked on tests/data/capture_h100)
    s, e = t.sql("SELECT min(start_ns), max(end_ns) FROM iterations").to_arrow().to_pylist()[0].values()
    p0, p1 = t.sql("SELECT min(ts_ns), max(ts_ns) FROM power").to_arrow().to_pylist()[0].values()
    h0, h1 = t.sql("SELECT min(ts_ns), max(ts_ns) FROM host_samples").to_arrow().to_pylist()[0].values()
    assert p0 < s and e < p1 and h0 < s and e < h1
    assert t.query("system_metrics", run="small", iteration="all").to_arrow().to_pylist()[-1]["iteration"] is None


def test_capture_records_nvtx_step_ranges_for_ncu(tmp_path, monkeypatch):
    """In the ncu pass (TRACEDB_CAPTURE_NCU=1) the capture runs no profiler or sampler
    and writes nothing: ncu gets the NVTX ranges alone."""
    monkeypatch.setenv("TRACEDB_CAPTURE_NCU", "1")
    pushed = []
    monkeypatch.setattr(torch.cuda.nvtx, "range_start", lambda name: pushed.append(name) or len(pushed))
    monkeypatch.setattr(torch.cuda.nvtx, "range_end", lambda rid: None)
    with tracedb.capture(tmp_path / "n", steps=2, warmup=1, wait=0) as cap:
        while not cap.done:
            cap.step()
    assert pushed == ["tracedb_step_0", "tracedb_step_1", "tracedb_step_2"]
    assert not (tmp_path / "n" / "capture.json").exists()
