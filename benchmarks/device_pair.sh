# Two versions of tracedb's ingest alternating on a many-core host, in one command: the 1 GB
# trace pinned to 2 cores and on all 16, and the 10 GB trace on 16 (its peak RSS and what holds
# it: bench_ingest.py --memory), each ingest its own process, the same bench_ingest.py for both.
# usage: OUT=DIR bash benchmarks/device_pair.sh BEFORE AFTER   (from the repository root;
# BEFORE and AFTER: directories importable as `tracedb`, e.g. the shipped checkout and a copy of
# a branch; python3 with duckdb, pyarrow importable; about 5 minutes and 12 GB of /tmp on 16 cores)
set -x
: "${OUT:?OUT must name the folder for the results}"
export PYTHONUNBUFFERED=1
T=tests/data/torch/h100_resnet50_bs64_amp.json.gz
mkdir -p /tmp/pair/before /tmp/pair/after
ln -sfn "$(realpath "$1")" /tmp/pair/before/tracedb
ln -sfn "$(realpath "$2")" /tmp/pair/after/tracedb
B="python3 benchmarks/bench_ingest.py"
run() {   # run LABEL WHO ARGS...: one bench_ingest.py process, the version WHO
  local label=$1 who=$2; shift 2
  echo "== $label $who"
  PYTHONPATH=/tmp/pair/$who${PYTHONPATH:+:$PYTHONPATH} timeout 120 $B "$@" --label "$who" 2>&1
}
[ -f /tmp/big.json ] || python3 benchmarks/make_big_trace.py $T 300 /tmp/big.json --jobs 16 >/dev/null
cat /tmp/big.json >/dev/null
for who in before after; do run 1g-2cores $who /tmp/big.json --cores 2 --skip-json-load --profile; done | tee $OUT/g1_2a.txt
for who in before after; do run 1g-16cores $who /tmp/big.json --cores 16 --skip-json-load --profile; done | tee $OUT/g1_16a.txt
S=$(date +%s)
[ -f /tmp/big10.json ] || python3 benchmarks/make_big_trace.py $T 2800 /tmp/big10.json --jobs 16 >/dev/null
echo "10 GB made in $(( $(date +%s) - S )) s"
for who in before after; do run 10g-16cores $who /tmp/big10.json --cores 16 --skip-json-load --memory; done | tee $OUT/g10_a.txt
for who in after before; do run 1g-16cores $who /tmp/big.json --cores 16 --skip-json-load --profile; done | tee $OUT/g1_16b.txt
for who in after before; do run 10g-16cores $who /tmp/big10.json --cores 16 --skip-json-load --profile; done | tee $OUT/g10_b.txt
for who in after before; do run 1g-2cores $who /tmp/big.json --cores 2 --skip-json-load; done | tee $OUT/g1_2b.txt
PYTHONPATH=/tmp/pair/after${PYTHONPATH:+:$PYTHONPATH} timeout 60 $B /tmp/big.json --cores 16 2>&1 | tail -4 | tee $OUT/g1_jsonload.txt
