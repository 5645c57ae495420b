#!/usr/bin/env bash
# Device run 124: H (build-carry/v121/H.cu: only the row sums summed and inverted while the last P.V runs; the plain
# loops' SASS is A's but for uniform register names) against A (the tree), the two alone, 8 rounds; rung 23's GPU tests on H.
set -uo pipefail
R=/tmp/run124; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
cp build-carry/runCB.sh $R/run.sh
rm -rf /tmp/srcH; mkdir -p /tmp/srcH && tar cf - --exclude=./build --exclude=./build-* . | tar xf - -C /tmp/srcH
cp build-carry/v121/H.cu /tmp/srcH/kernels/23_final_hopper/final_hopper.cu
( cmake -S /tmp/srcH -B /tmp/srcH/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
  cmake --build /tmp/srcH/build -j 8 --target flash_ladder test_gpu > $R/build_H.log 2>&1 || grep -E -A5 "error" $R/build_H.log | head -30 ) &
[ -f build/build.ninja ] || cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
cmake --build build -j 8 --target flash_ladder > $R/build_A.log 2>&1 || tail -20 $R/build_A.log
wait
echo "builds $(( $(date +%s)-t0 )) s"
timeout 100 /tmp/srcH/build/tests/test_gpu --gtest_filter='ShortTiles.Rung23*:*k23*:*23*' > $R/T_H.txt 2>&1; echo "T rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $R/T_H.txt | head -6
v() { left=$(( 570 - ($(date +%s)-t0) )); [ $left -lt 30 ] && { echo "$name skipped"; return; }
  timeout $left python3 build-carry/variants.py --rounds 8 "$@" > $R/v_$name.txt 2>&1; echo "$name rc=$? $(( $(date +%s)-t0 )) s"
  tar czf $OUT/run124.tgz -C /tmp run124; }
L=A=build/libflash_ladder.so,H=/tmp/srcH/build/libflash_ladder.so
name=d128 v --libs $L --d 128 --n 512,1024,2048,4096 --b 16 --out $R/v_d128.json
name=d128c v --libs $L --d 128 --causal --n 1024,2048,4096 --b 16 --out $R/v_d128c.json
name=d64 v --libs $L --d 64 --n 512,1024,4096 --b 16 --out $R/v_d64.json
name=d64c v --libs $L --d 64 --causal --n 2048 --b 16 --out $R/v_d64c.json
name=d256 v --libs $L --d 256 --n 2048,4096 --b 16 --out $R/v_d256.json
python3 - <<'PY'
import json, glob, statistics as st
for f in sorted(glob.glob('/tmp/run124/v_*.json')):
    for r in json.load(open(f)):
        ra = r['runs']; x = [m/a for m, a in zip(ra['H'], ra['A'])]
        print(f.split('/')[-1][2:-5], r['N'], 'H/A %.3f' % st.median(x), 'A/cudnn %.3f H/cudnn %.3f' % (st.median([m/a for m, a in zip(ra['A'], ra['cudnn'])]), st.median([m/a for m, a in zip(ra['H'], ra['cudnn'])])), [round(y, 3) for y in x], r['ok'])
PY
tar czf $OUT/run124.tgz -C /tmp run124
