#!/usr/bin/env bash
# Device run 81 (rung 23 with units): rungs 16-23, FlashAttention-2 and cuDNN, every series, compare_sdpa
# --rounds 5 (run 80's three rounds left cuDNN's N = 512-1024 cells on disturbed rounds).
set -uo pipefail
R=/tmp/run81; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=16;17;18;19;20;21;22;23" >/dev/null 2>&1 || exit 1
cmake --build build -j 16 --target flash_ladder ladder >$R/build.log 2>&1 || { grep -E -A5 "error" $R/build.log | head -40; exit 1; }
echo "build $(( $(date +%s)-t0 )) s"
cp build-carry/runAK.sh $R/run.sh
J=$R/h100_final_hopper_sdpa.json
C="python3 scripts/compare_sdpa.py --repeats 15 --rounds 5 --kernels 16,17,18,19,20,21,22,23 --out $J"
$C > $R/d128.txt 2>&1; echo "d128 rc=$? $(( $(date +%s)-t0 )) s"
$C --causal --merge > $R/d128c.txt 2>&1; echo "d128c rc=$? $(( $(date +%s)-t0 )) s"
tar czf $OUT/run81.tgz -C /tmp run81
$C --d 64 --merge > $R/d64.txt 2>&1; echo "d64 rc=$?"
$C --d 64 --causal --merge > $R/d64c.txt 2>&1; echo "d64c rc=$? $(( $(date +%s)-t0 )) s"
tar czf $OUT/run81.tgz -C /tmp run81
$C --d 256 --n 512,1024,2048,4096,8192 --merge > $R/d256.txt 2>&1; echo "d256 rc=$?"
$C --d 256 --n 512,1024,2048,4096,8192 --causal --merge > $R/d256c.txt 2>&1; echo "d256c rc=$? $(( $(date +%s)-t0 )) s"
tar czf $OUT/run81.tgz -C /tmp run81
