#!/bin/bash
# The second device call (2026-11-28): decode_eager_mem.py. Usage: OUT=dir bash run_mem.sh
here=$(cd "$(dirname "$0")" && pwd); cd "$here"; export PYTHONUNBUFFERED=1
timeout 120 python3 decode_eager_mem.py /tmp/decode_eager_mem.json > $OUT/log_mem.txt 2>&1; echo "rc $?" >> $OUT/log_mem.txt
gzip -9 -c /tmp/decode_eager_mem.json > $OUT/h200_decode_eager_mem.json.gz; ls -la $OUT
