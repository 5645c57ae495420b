#!/usr/bin/env bash
# Device run 121: the item's edge shortened (runs 119-120's traces: 1.1 us from a consumer's last P.V done to its next
# first turn, of which item_of/work_of 0.26-0.48 and pack_o 0.29-0.38). E1: B of run 113 (the next item found while
# the last P.V runs) and the row sums summed and inverted there too; E2: the next item found while the item's first S
# runs, the row sums while the last P.V runs. Against A (the tree), 8 rounds; rung 23's GPU tests on both.
set -uo pipefail
R=/tmp/run121; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
cp build-carry/runBY.sh $R/run.sh
mk() { rm -rf /tmp/src$1; mkdir -p /tmp/src$1 && tar cf - --exclude=./build --exclude=./build-* . | tar xf - -C /tmp/src$1
  cp build-carry/v121/$1.cu /tmp/src$1/kernels/23_final_hopper/final_hopper.cu
  cmake -S /tmp/src$1 -B /tmp/src$1/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
  cmake --build /tmp/src$1/build -j 5 --target flash_ladder test_gpu > $R/build_$1.log 2>&1 || grep -E -A5 "error" $R/build_$1.log | head -30; }
mk E1 & mk E2 &
[ -f build/build.ninja ] || cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
cmake --build build -j 6 --target flash_ladder > $R/build_A.log 2>&1 || tail -20 $R/build_A.log
wait
echo "builds $(( $(date +%s)-t0 )) s"
for v in E1 E2; do timeout 100 /tmp/src$v/build/tests/test_gpu --gtest_filter='ShortTiles.Rung23*:*k23*:*23*' > $R/T_$v.txt 2>&1; echo "T $v rc=$? $(( $(date +%s)-t0 )) s"
  grep -E "^\[  (PASSED|FAILED)|tests ran|FAILED  \]" $R/T_$v.txt | head -6; done
tar czf $OUT/run121.tgz -C /tmp run121
v() { left=$(( 570 - ($(date +%s)-t0) )); [ $left -lt 30 ] && { echo "$name skipped"; return; }
  timeout $left python3 build-carry/variants.py --rounds 8 "$@" > $R/v_$name.txt 2>&1; echo "$name rc=$? $(( $(date +%s)-t0 )) s"
  tar czf $OUT/run121.tgz -C /tmp run121; }
L=A=build/libflash_ladder.so,E1=/tmp/srcE1/build/libflash_ladder.so,E2=/tmp/srcE2/build/libflash_ladder.so
name=d128 v --libs $L --d 128 --n 512,1024,2048,4096 --b 16 --out $R/v_d128.json
name=d128c v --libs $L --d 128 --causal --n 1024,4096 --b 16 --out $R/v_d128c.json
name=d64 v --libs $L --d 64 --n 512,1024,2048 --b 16 --out $R/v_d64.json
name=d256 v --libs $L --d 256 --n 1024,2048 --b 16 --out $R/v_d256.json
python3 - <<'PY'
import json, glob, statistics as st
for f in sorted(glob.glob('/tmp/run121/v_*.json')):
    for r in json.load(open(f)):
        ra = r['runs']
        print(f.split('/')[-1][2:-5], r['N'], ' '.join('%s/A %.3f' % (x, st.median([m/a for m, a in zip(ra[x], ra['A'])])) for x in ('E1', 'E2') if x in ra),
              'A/cudnn %.3f' % st.median([m/a for m, a in zip(ra['A'], ra['cudnn'])]), 'E2', [round(m/a, 3) for m, a in zip(ra['E2'], ra['A'])], r['ok'])
PY
tar czf $OUT/run121.tgz -C /tmp run121
