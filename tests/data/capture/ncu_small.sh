#!/bin/bash
# Capture tests/data/ncu/small_cnn_*: one ncu report of small_cnn_step.py with
# the fixture's metric list, exported in every CSV form tracedb reads.
# Usage: ncu_small.sh OUTDIR   (on a machine with a GPU and ncu)
set -euo pipefail
out=$1; here=$(dirname "$0")
metrics=dram__sectors_read,dram__sectors_write,gpu__time_duration,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st,l1tex__t_sectors_pipe_lsu_mem_global_op_ld,l1tex__t_sectors_pipe_lsu_mem_global_op_ld_lookup_hit,lts__t_sectors_op_read,lts__t_sectors_op_read_lookup_hit,lts__t_sectors_op_write,sm__inst_executed_pipe_tensor_op_gmma,sm__inst_executed_pipe_tensor_op_hmma,sm__pipe_tensor_cycles_active,sm__pipe_tensor_op_hmma_cycles_active,smsp__cycles_active,smsp__cycles_elapsed,smsp__inst_executed_pipe_tensor_op_gmma,smsp__inst_executed_pipe_tensor_op_hmma,smsp__inst_issued,smsp__issue_active,smsp__pipe_tensor_cycles_active,smsp__pipe_tensor_op_hmma_cycles_active
ncu --profile-from-start off --clock-control none --metrics "$metrics" \
    -f -o "$out/small_cnn" python3 "$here/small_cnn_step.py" > "$out/ncu_stdout.txt" 2>&1
rep="$out/small_cnn.ncu-rep"
ncu --import "$rep" --csv --page raw > "$out/small_cnn_raw.csv"
ncu --import "$rep" --csv --page raw --print-units base > "$out/small_cnn_raw_baseunits.csv"
ncu --import "$rep" --csv --page details > "$out/small_cnn_details.csv"
ncu --import "$rep" --csv --page details --print-metric-name name --print-units base > "$out/small_cnn_details_names_baseunits.csv"
ncu --version > "$out/ncu_version.txt"
