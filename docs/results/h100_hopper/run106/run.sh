#!/usr/bin/env bash
# Device run 106: the L2 prefetch spread: the next item's first P K/V tiles, one after each of this item's last P loads.
# A = HEAD 96baec1 (build-carry/base104), S2 = the tree (P = 2), S4 = P = 4.
# variants.py, one process, alternating rounds. Rung 23's GPU tests on S2.
set -uo pipefail
R=/tmp/run106; mkdir -p $R
t0=$(date +%s)
cp build-carry/runBJ.sh $R/run.sh
for v in A S4; do
  mkdir -p /tmp/src$v && tar cf - --exclude=./build --exclude=./build-* . | tar xf - -C /tmp/src$v
done
cp build-carry/base104/final_hopper.cu build-carry/base104/schedule.cuh /tmp/srcA/kernels/23_final_hopper/
( cmake -S /tmp/srcA -B /tmp/srcA/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
  cmake --build /tmp/srcA/build -j 4 --target flash_ladder > $R/build_A.log 2>&1 || tail -20 $R/build_A.log ) &
( cmake -S /tmp/srcS4 -B /tmp/srcS4/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" -DCMAKE_CUDA_FLAGS=-DFL_PREFETCH_TILES=4 >/dev/null 2>&1
  cmake --build /tmp/srcS4/build -j 4 --target flash_ladder > $R/build_S4.log 2>&1 || tail -20 $R/build_S4.log ) &
cmake -S . -B build-T -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
cmake --build build-T -j 8 --target test_gpu flash_ladder > $R/build_T.log 2>&1 || tail -20 $R/build_T.log
wait
echo "builds $(( $(date +%s)-t0 )) s"
timeout 200 build-T/tests/test_gpu --gtest_filter='ShortTiles.Rung23*:*k23*:*23*' > $R/T.txt 2>&1; echo "T rc=$? $(( $(date +%s)-t0 )) s"; grep -E "^\[  (PASSED|FAILED)|tests ran" $R/T.txt | head -12
tar czf $OUT/run106.tgz -C /tmp run106
LIBS=A=/tmp/srcA/build/libflash_ladder.so,S2=build-T/libflash_ladder.so,S4=/tmp/srcS4/build/libflash_ladder.so
v() { left=$(( 580 - ($(date +%s)-t0) )); [ $left -lt 30 ] && return
  timeout $left python3 build-carry/variants.py --libs $LIBS --rounds 6 "$@" > $R/v_$name.txt 2>&1; echo "$name rc=$? $(( $(date +%s)-t0 )) s"
  tar czf $OUT/run106.tgz -C /tmp run106; }
name=d128 v --d 128 --n 512,1024,2048,4096 --out $R/v_d128.json
name=d128c v --d 128 --causal --n 512,1024,2048 --out $R/v_d128c.json
name=d64 v --d 64 --n 512,1024,2048 --out $R/v_d64.json
name=d256 v --d 256 --n 512,1024,4096 --out $R/v_d256.json
python3 - <<'PY'
import json, glob, statistics as st
for f in sorted(glob.glob('/tmp/run106/v_*.json')):
    for r in json.load(open(f)):
        ra = r['runs']; t = r['tflops']
        print(f.split('/')[-1][2:-5], r['N'], 'A %.0f S2 %.0f S4 %.0f cudnn %.0f' % (t['A'], t['S2'], t['S4'], t['cudnn']),
              'S2/A %.3f S4/A %.3f' % (st.median([m/a for m, a in zip(ra['S2'], ra['A'])]), st.median([m/a for m, a in zip(ra['S4'], ra['A'])])), r['ok'])
PY
