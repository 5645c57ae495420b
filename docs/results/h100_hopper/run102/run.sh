#!/usr/bin/env bash
# Device run 102: the tree (rung 23: query tiles counted from the last row; a narrow first visit's softmax): rungs 16-23,
# FlashAttention-2 and cuDNN, every series, compare_sdpa --rounds 5, merged into the committed sweep (runs 81 and 93).
set -uo pipefail
R=/tmp/run102; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=16;17;18;19;20;21;22;23" >/dev/null 2>&1 || exit 1
cmake --build build -j 16 --target flash_ladder ladder >$R/build.log 2>&1 || { grep -E -A5 "error" $R/build.log | head -40; exit 1; }
echo "build $(( $(date +%s)-t0 )) s"
cp build-carry/runBF.sh $R/run.sh
J=$R/h100_final_hopper_sdpa.json
cp docs/results/h100_final_hopper_sdpa.json $J
C="python3 scripts/compare_sdpa.py --repeats 15 --rounds 5 --kernels 16,17,18,19,20,21,22,23 --out $J --merge"
s() { name=$1; shift; left=$(( 590 - ($(date +%s)-t0) )); [ $left -lt 60 ] && { echo "$name skipped"; return; }
  timeout $left $C "$@" > $R/$name.txt 2>&1; echo "$name rc=$? $(( $(date +%s)-t0 )) s"; tar czf $OUT/run102.tgz -C /tmp run102; }
s d128
s d128c --causal
s d64c --d 64 --causal
s d64 --d 64
s d256 --d 256 --n 512,1024,2048,4096,8192
s d256c --d 256 --n 512,1024,2048,4096,8192 --causal
python3 - <<'PY'
import json
d = json.load(open('/tmp/run102/h100_final_hopper_sdpa.json'))
t = {}
for r in d['rows']:
    if r['dtype'] == 'fp16': t[(r['d'], r['causal'], r['N'], r['impl'])] = r['tflops']
for (dd, c) in ((128, False), (128, True), (64, False), (64, True), (256, False), (256, True)):
    print(dd, 'causal' if c else '', ' '.join('%d:%.3f' % (n, t[(dd, c, n, '23_final_hopper')] / t[(dd, c, n, 'sdpa_cudnn')]) for n in sorted({k[2] for k in t if k[0] == dd and k[1] == c})))
PY
