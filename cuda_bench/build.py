"""Compile chase.cu once per source and GPU architecture; reuse the binary after."""
import hashlib
import os
import shutil
import subprocess
from pathlib import Path
from ..errors import TracedbError

SOURCE = Path(__file__).with_name("chase.cu")


class BuildError(TracedbError):
    pass


def gpu_arch():
    """sm_XY of GPU 0, from nvidia-smi."""
    out = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
                         capture_output=True, text=True)
    if out.returncode != 0 or not out.stdout.strip():
        raise BuildError("nvidia-smi cannot tell the GPU's compute capability (no GPU here?)")
    return "sm_" + out.stdout.split()[0].replace(".", "")


def has_nvml_header():
    """Whether the CUDA toolkit next to nvcc ships nvml.h (pip-installed toolkits may not)."""
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    root = Path(nvcc).resolve().parent.parent
    return any(root.glob("include/nvml.h")) or any(root.glob("targets/*/include/nvml.h"))


def cache_dir():
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "tracedb" / "cuda_bench"


def binary(arch=None):
    """Path of the compiled benchmark for `arch` (compiled now if not cached)."""
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    if not os.path.exists(nvcc):
        raise BuildError("nvcc not found: install the CUDA toolkit to build cuda_bench")
    arch = arch or gpu_arch()
    src = SOURCE.read_bytes()
    key = hashlib.sha256(src + arch.encode()).hexdigest()[:16]
    out = cache_dir() / f"chase-{arch}-{key}"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    stubs = Path(nvcc).resolve().parent.parent / "lib64" / "stubs"
    cmd = [nvcc, "-O3", f"-arch={arch}", "-std=c++17", "-o", str(out) + ".tmp", str(SOURCE),
           f"-L{stubs}", "-lnvidia-ml"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        lines = r.stderr.strip().splitlines() or ["?"]
        raise BuildError("nvcc failed: " + next((l for l in lines if "error" in l), lines[-1]))
    os.replace(str(out) + ".tmp", out)
    return out
