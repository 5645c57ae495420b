#!/usr/bin/env bash
# Device run 116: P (the tree: the producer loads the next item's Q as soon as its stage is free, probed before each
# K/V tile, not after the item's last) against A (HEAD, build-carry/base113), 8 rounds; rung 23's GPU tests on P.
set -uo pipefail
R=/tmp/run116; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
cp build-carry/runBT.sh $R/run.sh
( [ -f /tmp/srcA/build/libflash_ladder.so ] && cmp -s build-carry/base113/final_hopper.cu /tmp/srcA/kernels/23_final_hopper/final_hopper.cu ) || {
  rm -rf /tmp/srcA; mkdir -p /tmp/srcA && tar cf - --exclude=./build --exclude=./build-* . | tar xf - -C /tmp/srcA
  cp build-carry/base113/final_hopper.cu build-carry/base113/schedule.cuh /tmp/srcA/kernels/23_final_hopper/
  git -C /tmp/srcA checkout -- common/ptx/mbarrier.cuh 2>/dev/null
  cmake -S /tmp/srcA -B /tmp/srcA/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
  cmake --build /tmp/srcA/build -j 4 --target flash_ladder > $R/build_A.log 2>&1 || tail -20 $R/build_A.log; } &
cmake -S . -B build-P -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
cmake --build build-P -j 10 --target flash_ladder test_gpu > $R/build_P.log 2>&1 || { grep -E -A5 "error" $R/build_P.log | head -40; }
wait
echo "builds $(( $(date +%s)-t0 )) s"
timeout 150 build-P/tests/test_gpu --gtest_filter='ShortTiles.Rung23*:*k23*:*23*' > $R/T.txt 2>&1; echo "T rc=$? $(( $(date +%s)-t0 )) s"
grep -E "^\[  (PASSED|FAILED)|tests ran|FAILED  \]" $R/T.txt | head -12
tar czf $OUT/run116.tgz -C /tmp run116
v() { left=$(( 590 - ($(date +%s)-t0) )); [ $left -lt 30 ] && { echo "$name skipped"; return; }
  timeout $left python3 build-carry/variants.py --rounds 8 "$@" > $R/v_$name.txt 2>&1; echo "$name rc=$? $(( $(date +%s)-t0 )) s"
  tar czf $OUT/run116.tgz -C /tmp run116; }
L=A=/tmp/srcA/build/libflash_ladder.so,P=build-P/libflash_ladder.so
name=d128 v --libs $L --d 128 --n 512,1024,2048,4096 --b 16 --out $R/v_d128.json
name=d64 v --libs $L --d 64 --n 512,1024,2048 --b 16 --out $R/v_d64.json
name=d128c v --libs $L --d 128 --causal --n 1024,2048,4096 --b 16 --out $R/v_d128c.json
name=d256 v --libs $L --d 256 --n 1024,2048,4096 --b 16 --out $R/v_d256.json
python3 - <<'PY'
import json, glob, statistics as st
for f in sorted(glob.glob('/tmp/run116/v_*.json')):
    for r in json.load(open(f)):
        ra = r['runs']
        print(f.split('/')[-1][2:-5], r['N'], 'P/A %.3f' % st.median([m/a for m, a in zip(ra['P'], ra['A'])]),
              'A/cudnn %.3f P/cudnn %.3f' % (st.median([m/a for m, a in zip(ra['A'], ra['cudnn'])]), st.median([m/a for m, a in zip(ra['P'], ra['cudnn'])])),
              [round(m/a, 3) for m, a in zip(ra['P'], ra['A'])], r['ok'])
PY
