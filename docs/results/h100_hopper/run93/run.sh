#!/usr/bin/env bash
# Device run 93: the tree (rung 23: each consumer its own tiles at d = 64 and 256): rungs 16-23, FlashAttention-2
# and cuDNN, the d = 64 and d = 256 series, compare_sdpa --rounds 5, merged into the committed sweep (run 81's).
set -uo pipefail
R=/tmp/run93; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=16;17;18;19;20;21;22;23" >/dev/null 2>&1 || exit 1
cmake --build build -j 16 --target flash_ladder ladder >$R/build.log 2>&1 || { grep -E -A5 "error" $R/build.log | head -40; exit 1; }
echo "build $(( $(date +%s)-t0 )) s"
cp build-carry/runAW.sh $R/run.sh
J=$R/h100_final_hopper_sdpa.json
cp docs/results/h100_final_hopper_sdpa.json $J
C="python3 scripts/compare_sdpa.py --repeats 15 --rounds 5 --kernels 16,17,18,19,20,21,22,23 --out $J --merge"
$C --d 64 > $R/d64.txt 2>&1; echo "d64 rc=$? $(( $(date +%s)-t0 )) s"
$C --d 64 --causal > $R/d64c.txt 2>&1; echo "d64c rc=$? $(( $(date +%s)-t0 )) s"
tar czf $OUT/run93.tgz -C /tmp run93
$C --d 256 --n 512,1024,2048,4096,8192 > $R/d256.txt 2>&1; echo "d256 rc=$?"
$C --d 256 --n 512,1024,2048,4096,8192 --causal > $R/d256c.txt 2>&1; echo "d256c rc=$? $(( $(date +%s)-t0 )) s"
tar czf $OUT/run93.tgz -C /tmp run93
python3 - <<'PY'
import json
d = json.load(open('/tmp/run93/h100_final_hopper_sdpa.json'))
t = {}
for r in d['rows']:
    t[(r['d'], r['causal'], r['N'], r['impl'])] = r['tflops']
for (dd, c) in ((64, False), (64, True), (256, False), (256, True)):
    for n in sorted({k[2] for k in t if k[0] == dd and k[1] == c}):
        a, cu, fa = t.get((dd, c, n, '23_final_hopper')), t.get((dd, c, n, 'sdpa_cudnn')), t.get((dd, c, n, 'sdpa_flash'))
        print(dd, 'causal' if c else '', n, '23 %.0f cudnn %.0f  %.3f  fa2 %.3f' % (a, cu, a / cu, a / fa))
PY
