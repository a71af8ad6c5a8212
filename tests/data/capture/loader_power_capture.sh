#!/bin/bash
# Capture tests/data/torch_loader/loader_slow_bs256*: the slow set-up of
# torch_loader_step.py at batch 256 (iterations of ~0.3 s, longer than the
# power sensors' 100 ms update period) with an nvidia-smi power log beside it.
# Usage: loader_power_capture.sh OUTDIR
set -uo pipefail
out=$1; here=$(dirname "$0")
q=timestamp,index,name,power.draw,power.draw.instant,clocks.sm,clocks.mem,temperature.gpu
nvidia-smi --query-gpu=$q --format=csv -lms 20 > "$out/loader_slow_bs256_nvidia_smi.csv" &
a=$!
sleep 0.5
BATCH=256 python3 "$here/torch_loader_step.py" trace slow "$out/loader_slow_bs256.json"
sleep 0.5
kill $a
gzip -9 "$out/loader_slow_bs256.json" "$out/loader_slow_bs256_nvidia_smi.csv"
