#!/usr/bin/env bash
# Device run 80 (rung 23 with units: causal pairs; compare_sdpa --rounds 3): rungs 16-23, FlashAttention-2 and cuDNN in one results file, every series
# (d = 64/128/256, causal and not); GQA; N + 1.
set -uo pipefail
R=/tmp/run80; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=16;17;18;19;20;21;22;23" >/dev/null 2>&1 || exit 1
cmake --build build -j 16 --target flash_ladder ladder >$R/build.log 2>&1 || { grep -E -A5 "error" $R/build.log | head -40; exit 1; }
echo "build $(( $(date +%s)-t0 )) s"
J=$R/h100_final_hopper_sdpa.json
C="python3 scripts/compare_sdpa.py --repeats 15 --rounds 3 --kernels 16,17,18,19,20,21,22,23 --out $J"
$C > $R/d128.txt 2>&1; echo "d128 rc=$? $(( $(date +%s)-t0 )) s"
$C --causal --merge > $R/d128c.txt 2>&1; echo "d128c rc=$? $(( $(date +%s)-t0 )) s"
tar czf $OUT/run80.tgz -C /tmp run80
$C --d 64 --merge > $R/d64.txt 2>&1; echo "d64 rc=$?"
$C --d 64 --causal --merge > $R/d64c.txt 2>&1; echo "d64c rc=$?"
$C --d 256 --n 512,1024,2048,4096,8192 --merge > $R/d256.txt 2>&1; echo "d256 rc=$?"
$C --d 256 --n 512,1024,2048,4096,8192 --causal --merge > $R/d256c.txt 2>&1; echo "d256c rc=$? $(( $(date +%s)-t0 )) s"
tar czf $OUT/run80.tgz -C /tmp run80
python3 scripts/gqa_bench.py --kernels 16,23 --out $R/h100_gqa.json > $R/gqa.txt 2>&1; echo "gqa rc=$? $(( $(date +%s)-t0 )) s"
python3 scripts/plus1_bench.py --kernel 23 --pairs 16:2048,16:4096 --causal-pairs 16:2048,16:4096 --rounds 4 --repeats 15 --out $R/plus1.json > $R/plus1.txt 2>&1; echo "plus1 rc=$? $(( $(date +%s)-t0 )) s"
cp build-carry/runAJ.sh $R/run.sh; echo "total $(( $(date +%s)-t0 )) s"
grep -h -E "^==|^  (23_final|22_pers|sdpa_cudnn)" $R/d128.txt | tail -40; tail -8 $R/plus1.txt; tail -6 $R/gqa.txt
tar czf $OUT/run80.tgz -C /tmp run80
