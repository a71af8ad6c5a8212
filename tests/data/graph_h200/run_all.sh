#!/bin/bash
# Run every capture of graph_h200/ on the GPU machine; everything into $OUT/cap.tgz, log in $OUT/log.txt.
# Usage (from the folder holding these scripts): OUT=dir bash run_all.sh
set -u
here=$(cd "$(dirname "$0")" && pwd); w=/tmp/cap; mkdir -p $w; cd "$here"
export PYTHONUNBUFFERED=1
{
nvidia-smi; nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv
python3 -c "import torch, jax; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'jax', jax.__version__)"
timeout 90 python3 graph_train.py $w/graph_train.json; echo "rc graph_train $?"
timeout 90 python3 graph_decode.py $w/graph_decode.json; echo "rc graph_decode $?"
timeout 90 python3 power_steps.py $w/power_steps.json $w/power_steps_power.csv; echo "rc power_steps $?"
timeout 90 python3 jax_step.py $w/jax; echo "rc jax $?"
timeout 200 python3 gpt_eager_compiled.py $w/gpt_eager.json $w/gpt_compiled.json; echo "rc gpt $?"
find $w -type f | xargs ls -la
} > $OUT/log.txt 2>&1
cd $w && find . -name '*.json' -o -name '*.csv' | xargs gzip -9; tar czf $OUT/cap.tgz . ; ls -la $OUT
