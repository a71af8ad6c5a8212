"""The .ncu-rep reader against a real report, where Nsight Compute and a GPU exist.

Profiles tests/data/capture/small_cnn_step.py with ncu, exports the same report
as base-unit raw CSV, and checks that both ingest to the same kernels and
counters. Skipped (with the reason) on machines without ncu, its Python
module or a GPU: CI. Run on the GPU machine; its last result is in
tests/data/README.md.
"""
import shutil
import subprocess
from pathlib import Path

import pytest

from tracedb.store.sql import rows
from tracedb.ingest import ingest_file
from tracedb.ingest.ncu_rep import find_ncu_report

CAPTURE = Path(__file__).parent / "data" / "capture"


def _gpu():
    try:
        import torch
        return torch.cuda.is_available()
    except ImportError:
        return False


pytestmark = pytest.mark.skipif(
    shutil.which("ncu") is None or find_ncu_report() is None or not _gpu(),
    reason="needs ncu, its ncu_report module and a CUDA GPU with torch")


def test_ncu_rep_and_its_csv_export_load_the_same(fresh_db, tmp_path):
    subprocess.run(["bash", str(CAPTURE / "ncu_small.sh"), str(tmp_path)], check=True)
    rep = tmp_path / "small_cnn.ncu-rep"
    csv = tmp_path / "small_cnn_raw_baseunits.csv"
    r1 = ingest_file(fresh_db, rep)
    r2 = ingest_file(fresh_db, csv)
    assert r1.kind == r2.kind == "ncu"          # an .ncu-rep run is an ncu run: it can be matched
    fmt = "SELECT metadata->>'source_format' FROM runs WHERE run = ?"
    assert rows(fresh_db, fmt, [r1.run]) == [("ncu-rep",)] and rows(fresh_db, fmt, [r2.run]) == [("ncu-csv",)]
    k = "SELECT kernel_id, normalize_kernel_name(name), grid_x, grid_y, grid_z, block_x, block_y, block_z, " \
        "registers_per_thread, shared_mem_bytes, dur_ns, stream FROM kernels WHERE run = ? ORDER BY kernel_id"
    assert rows(fresh_db, k, [r1.run]) == rows(fresh_db, k, [r2.run])
    c = "SELECT kernel_id, metric, value, unit FROM counters WHERE run = ? AND metric LIKE '%.sum' ORDER BY 1, 2"
    a, b = rows(fresh_db, c, [r1.run]), rows(fresh_db, c, [r2.run])
    assert len(a) == len(b) > 40 * 20
    for (k1, m1, v1, u1), (k2, m2, v2, u2) in zip(a, b):
        assert (k1, m1, u1) == (k2, m2, u2)
        assert v1 == pytest.approx(v2, rel=1e-6), (k1, m1)


STEPS = """
import torch
x = torch.randn(256, 256, device="cuda")
for n in range(3):
    r = torch.cuda.nvtx.range_start(f"tracedb_step_{n}")
    (x @ x).relu_().sum().item()
    torch.cuda.nvtx.range_end(r)
"""


def test_ncu_rep_gives_its_nvtx_step_like_the_csv(fresh_db, tmp_path):
    """A report profiled with --nvtx names the step of its kernels in either form: the
    raw CSV's range columns, and the ranges ncu_report gives (ncu_rep_dump.nvtx_columns)."""
    from tracedb.ingest.match import nvtx_step
    script = tmp_path / "steps.py"
    script.write_text(STEPS)
    base = tmp_path / "steps"
    subprocess.run(["ncu", "--nvtx", "--nvtx-include", "tracedb_step_1", "--metrics", "gpu__time_duration.sum",
                    "-f", "-o", str(base), "python3", str(script)], check=True, capture_output=True)
    csv = tmp_path / "steps_raw.csv"
    with open(csv, "w") as f:
        subprocess.run(["ncu", "--import", f"{base}.ncu-rep", "--csv", "--page", "raw", "--print-units", "base"],
                       stdout=f, check=True)
    r1, r2 = ingest_file(fresh_db, f"{base}.ncu-rep"), ingest_file(fresh_db, csv)
    n = "SELECT count(*) FROM kernels WHERE run = ?"
    assert rows(fresh_db, n, [r1.run]) == rows(fresh_db, n, [r2.run]) and rows(fresh_db, n, [r1.run])[0][0] >= 2
    assert nvtx_step(fresh_db, r1.run) == nvtx_step(fresh_db, r2.run) == 1
