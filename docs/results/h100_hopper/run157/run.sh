#!/usr/bin/env bash
# Device run 157: the tree at 56efb19's code (rung 23 unchanged since fba5b53): the full build, ctest -LE sanitize,
# ./build/ladder, then the sweep's d = 128 series (compare_sdpa --rounds 5, rungs 16-23 with FlashAttention-2 and
# cuDNN, non-causal and causal), merged into a copy of the committed results file.
set -uo pipefail
R=/tmp/run157; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader | tee $R/gpu.txt
python3 -c "import torch; print('torch', torch.__version__)" | tee -a $R/gpu.txt
t0=$(date +%s)
cp docs/results/h100_hopper/run157/run.sh $R/run.sh
rm -rf build
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >$R/configure.log 2>&1 || { tail -30 $R/configure.log; exit 1; }
cmake --build build -j 16 >$R/build.log 2>&1 || { grep -E -A5 "error" $R/build.log | head -60; exit 1; }
echo "build $(( $(date +%s)-t0 )) s"
timeout 300 ctest --test-dir build --output-on-failure -j 4 --timeout 200 -LE sanitize >$R/ctest.log 2>&1; echo "ctest rc=$? $(( $(date +%s)-t0 )) s"
grep -E "tests passed|tests failed" $R/ctest.log; grep -E "^\s+[0-9]+ - .*(Failed|Timeout|Not Run)" $R/ctest.log | head -20
grep -c "Skipped" $R/ctest.log | sed 's/^/lines with Skipped: /'
timeout 100 ./build/ladder >$R/ladder.txt 2>&1; echo "ladder rc=$? $(( $(date +%s)-t0 )) s fails=$(grep -ciE 'fail' $R/ladder.txt)"
tar czf $OUT/run157.tgz -C /tmp run157
J=$R/h100_final_hopper_sdpa.json
cp docs/results/h100_final_hopper_sdpa.json $J
C="python3 scripts/compare_sdpa.py --repeats 15 --rounds 5 --kernels 16,17,18,19,20,21,22,23 --out $J --merge"
s() { name=$1; shift; left=$(( 590 - ($(date +%s)-t0) )); [ $left -lt 60 ] && { echo "$name skipped"; return; }
  timeout $left $C "$@" > $R/$name.txt 2>&1; echo "$name rc=$? $(( $(date +%s)-t0 )) s"; tar czf $OUT/run157.tgz -C /tmp run157; }
s d128
s d128c --causal
python3 - <<'PY'
import json
d = json.load(open('/tmp/run157/h100_final_hopper_sdpa.json'))
t = {}
for r in d['rows']:
    if r['dtype'] == 'fp16': t[(r['d'], r['causal'], r['N'], r['impl'])] = r['tflops']
for c in (False, True):
    print(128, 'causal' if c else '', ' '.join('%d:%.3f' % (n, t[(128, c, n, '23_final_hopper')] / t[(128, c, n, 'sdpa_cudnn')]) for n in sorted({k[2] for k in t if k[0] == 128 and k[1] == c})))
PY
tar czf $OUT/run157.tgz -C /tmp run157
