#!/bin/bash
# The application breakdown of method.md section 7 on the GPU at hand:
# ResNet-50 bs64 AMP traced under `tracedb power-log`, profiled by ncu (section 3
# and memory counters), all ingested with the calibration points, then
# energy_breakdown. Usage: app_breakdown.sh CALIBRATION_POINTS.csv OUT_DIR
set -euo pipefail
cal=$1; out=$2; here=$(dirname "$0")
mkdir -p "$out"
python3 -m tracedb.cli power-log -o "$out/power.csv" --interval-ms 10 -- \
    python3 "$here/resnet_step.py" trace "$out/trace.json"
metrics=dram__sectors_read,dram__sectors_write,gpu__time_duration,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st,l1tex__t_sectors_pipe_lsu_mem_global_op_ld_lookup_hit,l1tex__t_sectors_pipe_lsu_mem_global_op_st_lookup_hit,lts__t_sectors_op_read_lookup_hit,lts__t_sectors_op_write_lookup_hit,smsp__cycles_active,smsp__cycles_elapsed,smsp__inst_executed_pipe_tensor_op_hmma,smsp__issue_active,smsp__pipe_tensor_cycles_active
ncu --profile-from-start off --clock-control none --metrics "$metrics" --csv --page raw --print-units base \
    python3 "$here/resnet_step.py" ncu > "$out/ncu_raw.csv"
db="$out/app.duckdb"
rm -f "$db"
python3 -m tracedb.cli ingest "$out/trace.json" --run resnet50_bs64_amp --db "$db"
python3 -m tracedb.cli ingest "$out/power.csv" --pair-with resnet50_bs64_amp --db "$db"
python3 -m tracedb.cli ingest "$out/ncu_raw.csv" --pair-with resnet50_bs64_amp --db "$db"
python3 -m tracedb.cli ingest "$cal" --db "$db"
python3 -m tracedb.cli query energy_summary --db "$db" --format csv > "$out/energy_summary.csv"
python3 -m tracedb.cli query energy_breakdown --db "$db" --format csv > "$out/energy_breakdown.csv"
python3 -m tracedb.cli query utilization_levels --db "$db" --param batch_size=64 --format csv > "$out/utilization_levels.csv"
gzip -f "$out/trace.json" "$out/ncu_raw.csv" "$out/power.csv"
cat "$out/energy_summary.csv" "$out/energy_breakdown.csv"
