#!/usr/bin/env bash
# Device run 135: the tree (rung 23 with the narrow first visit's GEMMs, its steps compiled apart, Q's descriptor
# uniform; run 134's checks) - the sweep's d = 128 series (rungs 16-23, FlashAttention-2, cuDNN, compare_sdpa
# --rounds 5), merged into a copy of the committed sweep; then N + 1 (plus1_bench, run 80's command) if time is left.
set -uo pipefail
R=/tmp/run135; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
cp build-carry/runCM.sh $R/run.sh
rm -rf build
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=16;17;18;19;20;21;22;23" >/dev/null 2>&1 || exit 1
cmake --build build -j 16 --target flash_ladder ladder >$R/build.log 2>&1 || { grep -E -A5 "error" $R/build.log | head -40; exit 1; }
echo "build $(( $(date +%s)-t0 )) s"
J=$R/h100_final_hopper_sdpa.json
cp docs/results/h100_final_hopper_sdpa.json $J
C="python3 scripts/compare_sdpa.py --repeats 15 --rounds 5 --kernels 16,17,18,19,20,21,22,23 --out $J --merge"
s() { name=$1; shift; left=$(( 590 - ($(date +%s)-t0) )); [ $left -lt 60 ] && { echo "$name skipped"; return; }
  timeout $left $C "$@" > $R/$name.txt 2>&1; echo "$name rc=$? $(( $(date +%s)-t0 )) s"; tar czf $OUT/run135.tgz -C /tmp run135; }
s d128
s d128c --causal
left=$(( 585 - ($(date +%s)-t0) ))
[ $left -gt 60 ] && { timeout $left python3 scripts/plus1_bench.py --kernel 23 --pairs 16:2048,16:4096 --causal-pairs 16:2048,16:4096 --rounds 4 --repeats 15 --out $R/plus1.json > $R/plus1.txt 2>&1; echo "plus1 rc=$? $(( $(date +%s)-t0 )) s"; tail -7 $R/plus1.txt; }
python3 - <<'PY'
import json
d = json.load(open('/tmp/run135/h100_final_hopper_sdpa.json'))
t = {}
for r in d['rows']:
    if r['dtype'] == 'fp16': t[(r['d'], r['causal'], r['N'], r['impl'])] = r['tflops']
for c in (False, True):
    print(128, 'causal' if c else '', ' '.join('%d:%.3f' % (n, t[(128, c, n, '23_final_hopper')] / t[(128, c, n, 'sdpa_cudnn')]) for n in sorted({k[2] for k in t if k[0] == 128 and k[1] == c})))
PY
tar czf $OUT/run135.tgz -C /tmp run135
