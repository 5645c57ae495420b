#!/usr/bin/env bash
# Device run 108: the epilogue of an item stored once the next item's first S is issued (O packed to T before it; the stmatrix,
# TMA store and LSE while that S runs), d = 64 and 128. A = HEAD (build-carry/base104), D = the tree.
# variants.py, one process, alternating rounds, 6 rounds. Rung 23's GPU tests on D.
set -uo pipefail
R=/tmp/run108; mkdir -p $R
t0=$(date +%s)
cp build-carry/runBL.sh $R/run.sh
for v in A; do
  mkdir -p /tmp/src$v && tar cf - --exclude=./build --exclude=./build-* . | tar xf - -C /tmp/src$v
done
cp build-carry/base104/final_hopper.cu build-carry/base104/schedule.cuh /tmp/srcA/kernels/23_final_hopper/
( cmake -S /tmp/srcA -B /tmp/srcA/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
  cmake --build /tmp/srcA/build -j 4 --target flash_ladder > $R/build_A.log 2>&1 || tail -20 $R/build_A.log ) &
cmake -S . -B build-T -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
cmake --build build-T -j 8 --target test_gpu flash_ladder > $R/build_T.log 2>&1 || tail -20 $R/build_T.log
wait
echo "builds $(( $(date +%s)-t0 )) s"
timeout 200 build-T/tests/test_gpu --gtest_filter='ShortTiles.Rung23*:*k23*:*23*' > $R/T.txt 2>&1; echo "T rc=$? $(( $(date +%s)-t0 )) s"; grep -E "^\[  (PASSED|FAILED)|tests ran" $R/T.txt | head -12
tar czf $OUT/run108.tgz -C /tmp run108
LIBS=A=/tmp/srcA/build/libflash_ladder.so,D=build-T/libflash_ladder.so
v() { left=$(( 580 - ($(date +%s)-t0) )); [ $left -lt 30 ] && return
  timeout $left python3 build-carry/variants.py --libs $LIBS --rounds 6 "$@" > $R/v_$name.txt 2>&1; echo "$name rc=$? $(( $(date +%s)-t0 )) s"
  tar czf $OUT/run108.tgz -C /tmp run108; }
name=d128 v --d 128 --n 512,1024,2048,4096,8192 --out $R/v_d128.json
name=d128c v --d 128 --causal --n 1024,2048,4096 --out $R/v_d128c.json
name=d64 v --d 64 --n 512,1024,2048 --out $R/v_d64.json
name=d64c v --d 64 --causal --n 2048,4096 --out $R/v_d64c.json
name=d256 v --d 256 --n 1024,4096 --out $R/v_d256.json
python3 - <<'PY'
import json, glob, statistics as st
for f in sorted(glob.glob('/tmp/run108/v_*.json')):
    for r in json.load(open(f)):
        ra = r['runs']; t = r['tflops']
        print(f.split('/')[-1][2:-5], r['N'], 'A %.0f D %.0f cudnn %.0f' % (t['A'], t['D'], t['cudnn']),
              'D/A %.3f D/cudnn %.3f' % (st.median([m/a for m, a in zip(ra['D'], ra['A'])]), st.median([m/a for m, a in zip(ra['D'], ra['cudnn'])])), r['ok'])
PY
