#!/bin/bash
# Capture tests/data/power/nvidia_smi_*: nvidia-smi power logs (with and without
# units) while a torch training loop runs with the profiler on its last steps.
# Usage: power_smi.sh OUTDIR
set -uo pipefail
out=$1; here=$(dirname "$0")
q=timestamp,index,name,power.draw,power.draw.instant,clocks.sm,clocks.mem,temperature.gpu
nvidia-smi --query-gpu=$q --format=csv -lms 20 > "$out/nvidia_smi_units.csv" &
a=$!
nvidia-smi --query-gpu=$q --format=csv,noheader,nounits -lms 20 > "$out/nvidia_smi_nounits.csv" &
b=$!
sleep 0.5
python3 "$here/torch_resnet_profiled.py" "$out/resnet18_bs32_amp_trace.json"
sleep 0.5
kill $a $b
