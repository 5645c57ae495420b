#!/usr/bin/env bash
# Device run 138: the tree (rung 23 = run 137's Wh, SASS byte for byte: the narrow first visit's GEMMs, the item's steps
# compiled apart for it, Q's descriptor uniform): the full build, ctest -LE sanitize, ./build/ladder; the sweep's
# d = 128 series (compare_sdpa --rounds 5, rungs 16-23, merged into a copy of the committed file); plus1_bench (run 80's
# command); a rung-23 build for scripts/fuzz.sh 5 6 (50 cases a seed) and scripts/sanitize.sh (four tools, both dtypes).
set -uo pipefail
R=/tmp/run138; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
cp build-carry/runCP.sh $R/run.sh
rm -rf /tmp/s23; mkdir -p /tmp/s23 && tar cf - --exclude=./build --exclude=./build-* . | tar xf - -C /tmp/s23
( cmake -S /tmp/s23 -B /tmp/s23/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
  cmake --build /tmp/s23/build -j 4 > $R/build_23.log 2>&1 || grep -E -A5 "error" $R/build_23.log | head -30 ) &
rm -rf build
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >$R/configure.log 2>&1 || { tail -30 $R/configure.log; exit 1; }
cmake --build build -j 12 >$R/build.log 2>&1 || { grep -E -A5 "error" $R/build.log | head -60; exit 1; }
wait
echo "build $(( $(date +%s)-t0 )) s"
timeout 300 ctest --test-dir build --output-on-failure -j 4 --timeout 200 -LE sanitize >$R/ctest.log 2>&1; echo "ctest rc=$? $(( $(date +%s)-t0 )) s"
grep -E "tests passed|tests failed" $R/ctest.log; grep -E "^\s+[0-9]+ - .*(Failed|Timeout|Not Run)" $R/ctest.log | head -20
timeout 100 ./build/ladder >$R/ladder.txt 2>&1; echo "ladder rc=$? $(( $(date +%s)-t0 )) s fails=$(grep -ciE 'fail' $R/ladder.txt)"
tar czf $OUT/run138.tgz -C /tmp run138
J=$R/h100_final_hopper_sdpa.json
cp docs/results/h100_final_hopper_sdpa.json $J
C="python3 scripts/compare_sdpa.py --repeats 15 --rounds 5 --kernels 16,17,18,19,20,21,22,23 --out $J --merge"
s() { name=$1; shift; left=$(( 470 - ($(date +%s)-t0) )); [ $left -lt 60 ] && { echo "$name skipped"; return; }
  timeout $left $C "$@" > $R/$name.txt 2>&1; echo "$name rc=$? $(( $(date +%s)-t0 )) s"; tar czf $OUT/run138.tgz -C /tmp run138; }
s d128
s d128c --causal
FL_FUZZ_CASES=50 BUILD=/tmp/s23/build OUT=$R timeout 60 scripts/fuzz.sh 5 6 > $R/fuzz.txt 2>&1; echo "fuzz rc=$? $(( $(date +%s)-t0 )) s"; tail -2 $R/fuzz.txt
left=$(( 592 - ($(date +%s)-t0) ))
timeout $left scripts/sanitize.sh --build /tmp/s23/build --out $R/sanitize > $R/sanitize.txt 2>&1; echo "sanitize rc=$? $(( $(date +%s)-t0 )) s"; grep -c clean $R/sanitize/summary.md
python3 - <<'PY'
import json
d = json.load(open('/tmp/run138/h100_final_hopper_sdpa.json'))
t = {}
for r in d['rows']:
    if r['dtype'] == 'fp16': t[(r['d'], r['causal'], r['N'], r['impl'])] = r['tflops']
for c in (False, True):
    print(128, 'causal' if c else '', ' '.join('%d:%.3f' % (n, t[(128, c, n, '23_final_hopper')] / t[(128, c, n, 'sdpa_cudnn')]) for n in sorted({k[2] for k in t if k[0] == 128 and k[1] == c})))
PY
tar czf $OUT/run138.tgz -C /tmp run138
