#!/usr/bin/env bash
# Device run 118: Q (build-carry/v118: at d = 128 the consumer's Q in registers, S as an RS wgmma; SASS plain loop
# 482 instructions against 509, R216) against A (the tree), 8 rounds; rung 23's GPU tests on Q; clock and power
# back to back (power2.py).
set -uo pipefail
R=/tmp/run118; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
cp build-carry/runBV.sh $R/run.sh; cp build-carry/v118/final_hopper.cu $R/final_hopper_Q.cu
rm -rf /tmp/srcQ; mkdir -p /tmp/srcQ && tar cf - --exclude=./build --exclude=./build-* . | tar xf - -C /tmp/srcQ
cp build-carry/v118/final_hopper.cu /tmp/srcQ/kernels/23_final_hopper/
( cmake -S /tmp/srcQ -B /tmp/srcQ/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
  cmake --build /tmp/srcQ/build -j 10 --target flash_ladder test_gpu > $R/build_Q.log 2>&1 || grep -E -A5 "error" $R/build_Q.log | head -30 ) &
[ -f build/libflash_ladder.so ] || { cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1; }
cmake --build build -j 6 --target flash_ladder > $R/build_A.log 2>&1 || tail -20 $R/build_A.log
wait
echo "builds $(( $(date +%s)-t0 )) s"
timeout 150 /tmp/srcQ/build/tests/test_gpu --gtest_filter='ShortTiles.Rung23*:*k23*:*23*' > $R/T.txt 2>&1; echo "T rc=$? $(( $(date +%s)-t0 )) s"
grep -E "^\[  (PASSED|FAILED)|tests ran|FAILED  \]" $R/T.txt | head -12
tar czf $OUT/run118.tgz -C /tmp run118
v() { left=$(( 560 - ($(date +%s)-t0) )); [ $left -lt 30 ] && { echo "$name skipped"; return; }
  timeout $left python3 build-carry/variants.py --rounds 8 "$@" > $R/v_$name.txt 2>&1; echo "$name rc=$? $(( $(date +%s)-t0 )) s"
  tar czf $OUT/run118.tgz -C /tmp run118; }
L=A=build/libflash_ladder.so,Q=/tmp/srcQ/build/libflash_ladder.so
name=d128 v --libs $L --d 128 --n 512,1024,2048,4096,8192 --b 16 --out $R/v_d128.json
name=d128c v --libs $L --d 128 --causal --n 1024,2048,4096 --b 16 --out $R/v_d128c.json
mkdir -p $R/power; timeout 120 python3 build-carry/power2.py --libs $L --out $R/power > $R/power.txt 2>&1; echo "power rc=$? $(( $(date +%s)-t0 )) s"
tail -12 $R/power.txt
python3 - <<'PY'
import json, glob, statistics as st
for f in sorted(glob.glob('/tmp/run118/v_*.json')):
    for r in json.load(open(f)):
        ra = r['runs']
        print(f.split('/')[-1][2:-5], r['N'], 'Q/A %.3f' % st.median([m/a for m, a in zip(ra['Q'], ra['A'])]),
              'A/cudnn %.3f Q/cudnn %.3f' % (st.median([m/a for m, a in zip(ra['A'], ra['cudnn'])]), st.median([m/a for m, a in zip(ra['Q'], ra['cudnn'])])),
              [round(m/a, 3) for m, a in zip(ra['Q'], ra['A'])], r['ok'])
PY
tar czf $OUT/run118.tgz -C /tmp run118
