#!/bin/bash
# Capture tests/data/power/h{100,200}_nvidia_smi_3power.csv.gz (nvidia-smi with the three
# power fields) while capture/graph_threads_step.py writes the trace
# tests/data/torch_graph/*_cuda_graph_threads.json.gz. Usage: graph_threads_smi.sh OUTDIR
set -uo pipefail
out=$1; here=$(dirname "$0")
q=timestamp,index,name,power.draw,power.draw.instant,power.draw.average,clocks.sm,clocks.mem,temperature.gpu
nvidia-smi --query-gpu=$q --format=csv -lms 20 > "$out/nvidia_smi_3power.csv" &
a=$!
sleep 0.5
python3 "$here/graph_threads_step.py" "$out/cuda_graph_threads.json"
sleep 0.5
kill $a
