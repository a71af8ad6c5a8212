#!/bin/bash
# Capture tests/data/torch_h100/loader_{slow,fixed}*: the traces of
# torch_loader_step.py in both set-ups and an ncu report (raw page, base units,
# the metric list of ncu_small.sh) of one step of each.
# Usage: loader_capture.sh OUTDIR   (on a machine with a GPU and ncu)
set -euo pipefail
out=$1; here=$(dirname "$0")
metrics=$(grep -o 'metrics=[^ ]*' "$here/ncu_small.sh" | head -1 | cut -d= -f2)
for mode in slow fixed; do
    python3 "$here/torch_loader_step.py" trace $mode "$out/loader_$mode.json" > "$out/trace_$mode.txt" 2>&1
    gzip -9 "$out/loader_$mode.json"
    ncu --profile-from-start off --clock-control none --metrics "$metrics" -f -o "$out/ncu_$mode" \
        python3 "$here/torch_loader_step.py" ncu $mode > "$out/ncu_$mode.txt" 2>&1
    ncu --import "$out/ncu_$mode.ncu-rep" --csv --page raw --print-units base | gzip -9 > "$out/loader_${mode}_ncu_raw_baseunits.csv.gz"
    rm "$out/ncu_$mode.ncu-rep"
done
