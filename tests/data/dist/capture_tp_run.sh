#!/bin/bash
# one device call: tp (all GPUs: TP 2 x DP N/2) with an NVML log of every GPU, tp_straggler, pp (2 ranks)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
S=.devscratch_jobs; O=/tmp/cap; mkdir -p $O
N=$(python3 -c 'import torch; print(torch.cuda.device_count())')
echo "GPUs: $N"
nvidia-smi > $O/nvidia_smi.txt 2>&1; nvidia-smi topo -m > $O/topo.txt 2>&1
python3 -c 'import torch, transformers; print(torch.__version__)' > $O/versions.txt 2>&1
python3 tests/data/dist/nvml_power.py $O/nvml_power_tp.csv 10 & P=$!
sleep 0.5
timeout 170 torchrun --standalone --nproc_per_node=$N $S/capture_tp.py tp $O > $O/tp.log 2>&1; echo "tp rc $?"
sleep 0.5; kill $P; wait $P
timeout 150 torchrun --standalone --nproc_per_node=$N $S/capture_tp.py tp_straggler $O > $O/tp_straggler.log 2>&1; echo "tp_straggler rc $?"
timeout 120 torchrun --standalone --nproc_per_node=2 $S/capture_tp.py pp $O > $O/pp.log 2>&1; echo "pp rc $?"
gzip -9 $O/nvml_power_tp.csv
tail -5 $O/*.log
ls -la $O $O/*
tar czf $OUT/capture.tar.gz -C $O .
