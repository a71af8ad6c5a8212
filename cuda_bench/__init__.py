"""cuda_bench: microbenchmarks that calibrate the data-movement energy model.

chase.cu (pointer-chasing loads per memory level) -> build.py (nvcc, cached)
-> plan.py (which points to run) -> run.py (ncu checks, NVML-timed sweep)
-> results.py (raw rows -> calibration points) -> `tracedb ingest` -> the
calibration_fits view in SQL.
"""
