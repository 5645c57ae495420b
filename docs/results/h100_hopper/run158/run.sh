#!/usr/bin/env bash
# Device run 158: the tree as run 157 - the sweep's d = 64 and d = 256 series (rungs 16-23, FlashAttention-2, cuDNN,
# compare_sdpa --rounds 5), merged into run 157's results file (in the tree as docs/results/h100_final_hopper_sdpa.json);
# GQA once (gqa_bench.py).
set -uo pipefail
R=/tmp/run158; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
cp docs/results/h100_hopper/run158/run.sh $R/run.sh
[ -f build/libflash_ladder.so ] || { cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null 2>&1 && cmake --build build -j 16 --target flash_ladder ladder >$R/build.log 2>&1 || exit 1; }
echo "build $(( $(date +%s)-t0 )) s"
J=$R/h100_final_hopper_sdpa.json
cp docs/results/h100_final_hopper_sdpa.json $J
C="python3 scripts/compare_sdpa.py --repeats 15 --rounds 5 --kernels 16,17,18,19,20,21,22,23 --out $J --merge"
s() { name=$1; shift; left=$(( 590 - ($(date +%s)-t0) )); [ $left -lt 60 ] && { echo "$name skipped"; return; }
  timeout $left $C "$@" > $R/$name.txt 2>&1; echo "$name rc=$? $(( $(date +%s)-t0 )) s"; tar czf $OUT/run158.tgz -C /tmp run158; }
s d64 --d 64
s d64c --d 64 --causal
s d256 --d 256 --n 512,1024,2048,4096,8192
s d256c --d 256 --n 512,1024,2048,4096,8192 --causal
left=$(( 585 - ($(date +%s)-t0) )); [ $left -gt 40 ] && { timeout $left python3 scripts/gqa_bench.py --kernels 16,23 --out $R/gqa1.json > $R/gqa1.txt 2>&1; echo "gqa1 rc=$? $(( $(date +%s)-t0 )) s"; }
python3 - <<'PY'
import json
d = json.load(open('/tmp/run158/h100_final_hopper_sdpa.json'))
t = {}
for r in d['rows']:
    if r['dtype'] == 'fp16': t[(r['d'], r['causal'], r['N'], r['impl'])] = r['tflops']
for dd in (64, 128, 256):
  for c in (False, True):
    print(dd, 'causal' if c else '', ' '.join('%d:%.3f' % (n, t[(dd, c, n, '23_final_hopper')] / t[(dd, c, n, 'sdpa_cudnn')]) for n in sorted({k[2] for k in t if k[0] == dd and k[1] == c})))
PY
tail -8 $R/gqa1.txt
tar czf $OUT/run158.tgz -C /tmp run158
