#!/usr/bin/env bash
# Device run 110: D (the tree: an item's O stored while the next item's first S runs): scripts/sanitize.sh on rung 23 (four
# tools, both dtypes), scripts/fuzz.sh 5 6; the sweep's d = 128 series (rungs 16-23, FlashAttention-2, cuDNN,
# compare_sdpa --rounds 5), merged into a copy of the committed sweep.
set -uo pipefail
R=/tmp/run110; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
cp build-carry/runBN.sh $R/run.sh
( cmake -S . -B build-S -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
  cmake --build build-S -j 4 --target ladder test_gpu > $R/build_S.log 2>&1 || tail -20 $R/build_S.log ) &
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=16;17;18;19;20;21;22;23" >/dev/null 2>&1 || exit 1
cmake --build build -j 12 --target flash_ladder ladder >$R/build.log 2>&1 || { grep -E -A5 "error" $R/build.log | head -40; exit 1; }
wait
echo "build $(( $(date +%s)-t0 )) s"
FL_FUZZ_CASES=50 BUILD=build-S OUT=$R timeout 100 scripts/fuzz.sh 5 6 > $R/fuzz.txt 2>&1; echo "fuzz rc=$? $(( $(date +%s)-t0 )) s"; tail -3 $R/fuzz.txt
timeout 200 scripts/sanitize.sh --build build-S --out $R/sanitize > $R/sanitize.txt 2>&1; echo "sanitize rc=$? $(( $(date +%s)-t0 )) s"
tail -3 $R/sanitize.txt
tar czf $OUT/run110.tgz -C /tmp run110
J=$R/h100_final_hopper_sdpa.json
cp docs/results/h100_final_hopper_sdpa.json $J
C="python3 scripts/compare_sdpa.py --repeats 15 --rounds 5 --kernels 16,17,18,19,20,21,22,23 --out $J --merge"
s() { name=$1; shift; left=$(( 590 - ($(date +%s)-t0) )); [ $left -lt 60 ] && { echo "$name skipped"; return; }
  timeout $left $C "$@" > $R/$name.txt 2>&1; echo "$name rc=$? $(( $(date +%s)-t0 )) s"; tar czf $OUT/run110.tgz -C /tmp run110; }
s d128
s d128c --causal
python3 - <<'PY'
import json
d = json.load(open('/tmp/run110/h100_final_hopper_sdpa.json'))
t = {}
for r in d['rows']:
    if r['dtype'] == 'fp16': t[(r['d'], r['causal'], r['N'], r['impl'])] = r['tflops']
for c in (False, True):
    print(128, 'causal' if c else '', ' '.join('%d:%.3f' % (n, t[(128, c, n, '23_final_hopper')] / t[(128, c, n, 'sdpa_cudnn')]) for n in sorted({k[2] for k in t if k[0] == 128 and k[1] == c})))
PY
