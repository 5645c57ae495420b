#!/usr/bin/env bash
# Device run 87: the tree (rung 23 unchanged, the new ShortTiles case) — rung 23's GPU tests and ShortTiles;
# then the multicast with two stages (M2) against the tree (A): clocks and power back to back (power2.py),
# and variants.py, 8 rounds, d = 128 non-causal.
set -uo pipefail
R=/tmp/run87; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
mkdir -p /tmp/srcM2 && tar cf - --exclude=./build --exclude=./build-* . | tar xf - -C /tmp/srcM2
python3 build-carry/m3/make.py kernels/23_final_hopper/final_hopper.cu /tmp/srcM2/kernels/23_final_hopper/final_hopper.cu
( cmake -S /tmp/srcM2 -B /tmp/srcM2/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" "-DCMAKE_CUDA_FLAGS=-DM_STAGES=2" >/dev/null 2>&1
  cmake --build /tmp/srcM2/build -j 5 --target flash_ladder > $R/build_M2.log 2>&1 || tail -20 $R/build_M2.log ) &
cmake -S . -B build-T -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=16;23" >/dev/null 2>&1
cmake --build build-T -j 11 --target flash_ladder test_gpu > $R/build_T.log 2>&1 || { grep -E -A5 "error" $R/build_T.log | head -40; exit 1; }
wait
echo "builds $(( $(date +%s)-t0 )) s"
timeout 200 ./build-T/tests/test_gpu --gtest_filter='*23_final_hopper*:ShortTiles.*' >$R/gpu23.log 2>&1; echo "gpu23 rc=$? $(( $(date +%s)-t0 )) s"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]|^\[       OK \] ShortTiles" $R/gpu23.log | head -20
tar czf $OUT/run87.tgz -C /tmp run87
LIBS=A=build-T/libflash_ladder.so,M2=/tmp/srcM2/build/libflash_ladder.so
timeout 150 python3 build-carry/power2.py --libs $LIBS --out $R --rounds 2 > $R/power2.txt 2>&1; echo "power2 rc=$? $(( $(date +%s)-t0 )) s"
tar czf $OUT/run87.tgz -C /tmp run87
left=$(( 580 - ($(date +%s)-t0) ))
timeout $left python3 build-carry/variants.py --libs $LIBS --rounds 8 --d 128 --n 4096,8192,16384 --out $R/v.json > $R/v_d128.txt 2>&1; echo "d128 rc=$? $(( $(date +%s)-t0 )) s"
cp build-carry/runAQ.sh build-carry/power2.py build-carry/m3/make.py $R/
tar czf $OUT/run87.tgz -C /tmp run87
cat $R/power2.txt
python3 - <<'PY'
import json, statistics as st
for r in json.load(open('/tmp/run87/v.json')):
    ra = r['runs']
    print(r['N'], 'A/cudnn %.3f' % st.median([a/c for a, c in zip(ra['A'], ra['cudnn'])]), 'M2/cudnn %.3f' % st.median([a/c for a, c in zip(ra['M2'], ra['cudnn'])]),
          'M2/A %.3f' % st.median([m/a for m, a in zip(ra['M2'], ra['A'])]), ' '.join('%.3f' % (m/a) for m, a in zip(ra['M2'], ra['A'])), r['ok'])
PY
