"""benchmarks/make_big_trace.py writes what ../shared/tools/scale_trace.py writes, byte
for byte (it is only faster), so benchmarks on its traces are benchmarks on those."""
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import TORCH

ROOT = Path(__file__).resolve().parent.parent
SCALE = ROOT.parent / "shared" / "tools" / "scale_trace.py"


@pytest.mark.skipif(not SCALE.exists(), reason="../shared/tools/scale_trace.py is not beside this checkout")
def test_fast_generator_writes_scale_traces_bytes(tmp_path):
    src = str(TORCH[0])
    subprocess.run([sys.executable, str(SCALE), src, "3", str(tmp_path / "ref.json")], check=True)
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "make_big_trace.py"), src, "3",
                    str(tmp_path / "fast.json")], check=True)
    ref, fast = (tmp_path / "ref.json").read_bytes(), (tmp_path / "fast.json").read_bytes()
    assert len(ref) > 1_000_000 and fast == ref
