"""torchvision resnet18, batch 32, AMP: ~2 s of training, then the torch profiler
around three steps (wait 1, warmup 1, active 1). Usage: OUT.json
(The training step lives in cuda_bench/resnet_step.py.)"""
import os
import subprocess
import sys

step = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "cuda_bench", "resnet_step.py")
sys.exit(subprocess.call([sys.executable, step, "trace", sys.argv[1], "resnet18", "32", "2"]))
