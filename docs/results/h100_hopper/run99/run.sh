#!/usr/bin/env bash
# Device run 99: three builds of rung 23 in one process (variants.py, alternating rounds): A = HEAD 0ece2ba, W = a narrow
# first visit with its own GEMMs (N = 16, one k-step) and softmax (run 98's), S = the same with the GEMMs whole and only
# the softmax narrow (the tree); query tiles from the last row in W and S. Rung 23's GPU tests on S.
set -uo pipefail
R=/tmp/run99; mkdir -p $R
t0=$(date +%s)
cp build-carry/runBC.sh $R/run.sh
for v in A W; do
  mkdir -p /tmp/src$v && tar cf - --exclude=./build --exclude=./build-* . | tar xf - -C /tmp/src$v
done
cp build-carry/base95/final_hopper.cu build-carry/base95/schedule.cuh /tmp/srcA/kernels/23_final_hopper/
cp build-carry/nar11/final_hopper.cu build-carry/nar11/schedule.cuh /tmp/srcW/kernels/23_final_hopper/
for v in A W; do
( cmake -S /tmp/src$v -B /tmp/src$v/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
  cmake --build /tmp/src$v/build -j 4 --target flash_ladder > $R/build_$v.log 2>&1 || tail -20 $R/build_$v.log ) &
done
cmake -S . -B build-T -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
cmake --build build-T -j 8 --target test_gpu flash_ladder > $R/build_T.log 2>&1 || tail -20 $R/build_T.log
wait
echo "builds $(( $(date +%s)-t0 )) s"
timeout 200 build-T/tests/test_gpu --gtest_filter='ShortTiles.Rung23*:*k23*' > $R/T.txt 2>&1; echo "T rc=$?"; grep -E "^\[  (PASSED|FAILED)" $R/T.txt | head -12
tar czf $OUT/run99.tgz -C /tmp run99
LIBS=A=/tmp/srcA/build/libflash_ladder.so,W=/tmp/srcW/build/libflash_ladder.so,S=build-T/libflash_ladder.so
v() { left=$(( 580 - ($(date +%s)-t0) )); [ $left -lt 30 ] && return
  timeout $left python3 build-carry/variants.py --libs $LIBS --rounds 6 "$@" > $R/v_$name.txt 2>&1; echo "$name rc=$? $(( $(date +%s)-t0 )) s"
  tar czf $OUT/run99.tgz -C /tmp run99; }
name=d128 v --d 128 --n 2048,2049,4096,4097,8192 --out $R/v_d128.json
name=d128c v --d 128 --causal --n 2048,2049,4096,4097 --out $R/v_d128c.json
name=d256 v --d 256 --n 2048,4096 --out $R/v_d256.json
name=d64c v --d 64 --causal --n 2048,4096 --out $R/v_d64c.json
name=d128s v --d 128 --n 1024 --out $R/v_d128s.json
python3 - <<'PY'
import json, glob, statistics as st
for f in sorted(glob.glob('/tmp/run99/v_*.json')):
    for r in json.load(open(f)):
        ra = r['runs']; t = r['tflops']
        print(f.split('/')[-1][2:-5], r['N'], 'A %.0f W %.0f S %.0f cudnn %.0f' % (t['A'], t['W'], t['S'], t['cudnn']),
              'W/A %.3f S/A %.3f' % (st.median([m/a for m, a in zip(ra['W'], ra['A'])]), st.median([m/a for m, a in zip(ra['S'], ra['A'])])), r['ok'])
PY
