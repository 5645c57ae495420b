#!/usr/bin/env bash
# Device run 105: the producer prefetches the next item's Q and its first K/V tiles into L2 (cp.async.bulk.prefetch.tensor)
# when it starts an item. A = HEAD 96baec1 (build-carry/base104), P4 = the tree (4 tiles), P8 = the tree with 8 tiles.
# variants.py, one process, alternating rounds. Rung 23's GPU tests on P4.
set -uo pipefail
R=/tmp/run105; mkdir -p $R
t0=$(date +%s)
cp build-carry/runBI.sh $R/run.sh
for v in A P8; do
  mkdir -p /tmp/src$v && tar cf - --exclude=./build --exclude=./build-* . | tar xf - -C /tmp/src$v
done
cp build-carry/base104/final_hopper.cu build-carry/base104/schedule.cuh /tmp/srcA/kernels/23_final_hopper/
( cmake -S /tmp/srcA -B /tmp/srcA/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
  cmake --build /tmp/srcA/build -j 4 --target flash_ladder > $R/build_A.log 2>&1 || tail -20 $R/build_A.log ) &
( cmake -S /tmp/srcP8 -B /tmp/srcP8/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" -DCMAKE_CUDA_FLAGS=-DFL_PREFETCH_TILES=8 >/dev/null 2>&1
  cmake --build /tmp/srcP8/build -j 4 --target flash_ladder > $R/build_P8.log 2>&1 || tail -20 $R/build_P8.log ) &
cmake -S . -B build-T -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
cmake --build build-T -j 8 --target test_gpu flash_ladder > $R/build_T.log 2>&1 || tail -20 $R/build_T.log
wait
echo "builds $(( $(date +%s)-t0 )) s"
timeout 200 build-T/tests/test_gpu --gtest_filter='ShortTiles.Rung23*:*k23*:*23*' > $R/T.txt 2>&1; echo "T rc=$? $(( $(date +%s)-t0 )) s"; grep -E "^\[  (PASSED|FAILED)|tests ran" $R/T.txt | head -12
tar czf $OUT/run105.tgz -C /tmp run105
LIBS=A=/tmp/srcA/build/libflash_ladder.so,P4=build-T/libflash_ladder.so,P8=/tmp/srcP8/build/libflash_ladder.so
v() { left=$(( 580 - ($(date +%s)-t0) )); [ $left -lt 30 ] && return
  timeout $left python3 build-carry/variants.py --libs $LIBS --rounds 6 "$@" > $R/v_$name.txt 2>&1; echo "$name rc=$? $(( $(date +%s)-t0 )) s"
  tar czf $OUT/run105.tgz -C /tmp run105; }
name=d128 v --d 128 --n 512,1024,2048,4096,8192 --out $R/v_d128.json
name=d128c v --d 128 --causal --n 512,1024,4096 --out $R/v_d128c.json
name=d64 v --d 64 --n 512,1024,4096 --out $R/v_d64.json
name=d256 v --d 256 --n 512,1024,4096 --out $R/v_d256.json
python3 - <<'PY'
import json, glob, statistics as st
for f in sorted(glob.glob('/tmp/run105/v_*.json')):
    for r in json.load(open(f)):
        ra = r['runs']; t = r['tflops']
        print(f.split('/')[-1][2:-5], r['N'], 'A %.0f P4 %.0f P8 %.0f cudnn %.0f' % (t['A'], t['P4'], t['P8'], t['cudnn']),
              'P4/A %.3f P8/A %.3f' % (st.median([m/a for m, a in zip(ra['P4'], ra['A'])]), st.median([m/a for m, a in zip(ra['P8'], ra['A'])])), r['ok'])
PY
