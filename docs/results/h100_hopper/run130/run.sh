#!/usr/bin/env bash
# Device run 130: QH (v121/QH.cu: run 118's Q in registers on the tree, which has H) against A (the tree), balanced
# order, 16 rounds, d = 128 only (QH changes nothing else); rung 23's GPU tests on QH.
set -uo pipefail
R=/tmp/run130; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
cp build-carry/runCH.sh $R/run.sh; cp build-carry/v121/QH.cu $R/
rm -rf /tmp/srcQH; mkdir -p /tmp/srcQH && tar cf - --exclude=./build --exclude=./build-* . | tar xf - -C /tmp/srcQH
cp build-carry/v121/QH.cu /tmp/srcQH/kernels/23_final_hopper/final_hopper.cu
( cmake -S /tmp/srcQH -B /tmp/srcQH/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
  cmake --build /tmp/srcQH/build -j 8 --target flash_ladder test_gpu > $R/build_QH.log 2>&1 || grep -E -A5 "error" $R/build_QH.log | head -30 ) &
rm -rf build; cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
cmake --build build -j 8 --target flash_ladder > $R/build_A.log 2>&1 || tail -20 $R/build_A.log
wait
echo "builds $(( $(date +%s)-t0 )) s"
timeout 100 /tmp/srcQH/build/tests/test_gpu --gtest_filter='ShortTiles.Rung23*:*k23*:*23*' > $R/T_QH.txt 2>&1; echo "T rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $R/T_QH.txt | head -6
v() { left=$(( 570 - ($(date +%s)-t0) )); [ $left -lt 30 ] && { echo "$name skipped"; return; }
  timeout $left python3 build-carry/variants.py --order balanced --rounds 16 "$@" > $R/v_$name.txt 2>&1; echo "$name rc=$? $(( $(date +%s)-t0 )) s"
  tar czf $OUT/run130.tgz -C /tmp run130; }
L=A=build/libflash_ladder.so,QH=/tmp/srcQH/build/libflash_ladder.so
name=d128 v --libs $L --d 128 --n 512,1024,2048,4096,8192 --b 16 --out $R/v_d128.json
name=d128c v --libs $L --d 128 --causal --n 1024,4096 --b 16 --out $R/v_d128c.json
python3 - <<'PY'
import json, glob, statistics as st
for f in sorted(glob.glob('/tmp/run130/v_*.json')):
    for r in json.load(open(f)):
        ra = r['runs']; x = [m/a for m, a in zip(ra['QH'], ra['A'])]
        print(f.split('/')[-1][2:-5], r['N'], 'QH/A %.3f' % st.median(x), 'A/cudnn %.3f' % st.median([m/a for m, a in zip(ra['A'], ra['cudnn'])]), [round(y, 3) for y in x], r['ok'])
PY
tar czf $OUT/run130.tgz -C /tmp run130
