# The day-end check of the ingest and report figures on a many-core host, in one command
# (docs/benchmarks.md, "merged main at the day's end"): the 1 GB and 10 GB traces, 8 rank traces,
# a 1 GB Nsight Systems export, and every report (also with iteration=all) on a 10 GB --op-totals database,
# pinned to 2 cores (the critical path's last: they may not finish in the time given).
# usage: OUT=DIR bash benchmarks/device_check.sh [ingest|reports]   (from the repository root, tracedb
# importable as a package; each part about 5 minutes and 25 GB of /tmp on 16 cores: two commands
# where one may run 10 minutes at most; neither: both)
set -x
: "${OUT:?OUT must name the folder for the results}"
export PYTHONUNBUFFERED=1
T=tests/data/torch/h100_resnet50_bs64_amp.json.gz
PART=${1:-both}
if [ "$PART" != reports ]; then
S=$(date +%s)
python3 benchmarks/make_big_trace.py $T 300 /tmp/big.json --jobs 16 >/dev/null
python3 benchmarks/make_big_trace.py $T 38 /tmp/ranks --ranks 8 --jobs 16 >/dev/null
python3 benchmarks/scale_nsys.py tests/data/nsys/mfu_2gpu_before.sqlite.gz 1000 /tmp/big.sqlite >/dev/null
ls -la /tmp/big.json /tmp/big.sqlite; du -sb /tmp/ranks; cat /tmp/big.json /tmp/big.sqlite /tmp/ranks/* >/dev/null
echo "made in $(( $(date +%s) - S )) s"
timeout 150 python3 benchmarks/bench_ingest.py /tmp/big.json --cores 2,16 --profile 2>&1 | tee $OUT/ingest1g.txt
timeout 60 python3 benchmarks/bench_ingest.py /tmp/big.json --cores 16 --skip-json-load 2>&1 | tail -3 | tee -a $OUT/ingest1g.txt
timeout 90 python3 benchmarks/bench_ingest.py /tmp/ranks 2>&1 | tee $OUT/folder.txt
timeout 90 python3 benchmarks/bench_nsys.py /tmp/big.sqlite 2>&1 | tail -8 | tee $OUT/nsys.txt
fi
S=$(date +%s)
[ -f /tmp/big10.json ] || python3 benchmarks/make_big_trace.py $T 2800 /tmp/big10.json --jobs 16 >/dev/null
ls -la /tmp/big10.json; echo "made in $(( $(date +%s) - S )) s"
if [ "$PART" != reports ]; then
timeout 150 python3 benchmarks/bench_ingest.py /tmp/big10.json --cores 16 --skip-json-load --repeat 2 2>&1 | tee $OUT/ingest10g.txt
fi
[ "$PART" = ingest ] && exit 0
timeout 150 python3 -c "
import resource, sys, time
from tracedb.cli import main
t = time.time(); rc = main(['ingest', '/tmp/big10.json', '--db', '/tmp/b10t.duckdb', '--op-totals'])
r = resource.getrusage(resource.RUSAGE_SELF)
print(f'op-totals ingest rc={rc} wall {time.time() - t:.2f} s cpu {r.ru_utime + r.ru_stime:.1f} s peak RSS {r.ru_maxrss / 1024:.0f} MB')
" 2>&1 | tail -3 | tee $OUT/optotals.txt
timeout 240 taskset -c 0,1 python3 benchmarks/bench_reports.py /tmp/b10t.duckdb --all --skip critical_path,critical_path_summary,what_if 2>&1 | tee $OUT/reports10g.txt
timeout 120 taskset -c 0,1 python3 benchmarks/bench_reports.py /tmp/b10t.duckdb --all --only critical_path,critical_path_summary,what_if 2>&1 | tee $OUT/critpath10g.txt
