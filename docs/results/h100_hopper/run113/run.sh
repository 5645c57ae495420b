#!/usr/bin/env bash
# Device run 113: the item's edges. A = HEAD (build-carry/base113); B = the next item found while the last P.V runs;
# C = B + O / l folded into the last P.V; D = the tree: C + at d = 256 O stored from registers, Q released at the last S.
# Rung 23's GPU tests on D, then variants.py (6 rounds) A/B/D at d = 64, 128; A/C/D at d = 256.
set -uo pipefail
R=/tmp/run113; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
cp build-carry/runBQ.sh $R/run.sh
mk() { # name file
  mkdir -p /tmp/src$1 && tar cf - --exclude=./build --exclude=./build-* . | tar xf - -C /tmp/src$1
  cp $2 /tmp/src$1/kernels/23_final_hopper/final_hopper.cu
  [ $1 = A ] && cp build-carry/base113/schedule.cuh /tmp/src$1/kernels/23_final_hopper/
  cmake -S /tmp/src$1 -B /tmp/src$1/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
  cmake --build /tmp/src$1/build -j 3 --target flash_ladder > $R/build_$1.log 2>&1 || tail -20 $R/build_$1.log; }
mk A build-carry/base113/final_hopper.cu &
mk B build-carry/v113/B_final_hopper.cu &
mk C build-carry/v113/C_final_hopper.cu &
cmake -S . -B build-D -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
cmake --build build-D -j 6 --target flash_ladder test_gpu > $R/build_D.log 2>&1 || { grep -E -A5 "error" $R/build_D.log | head -40; }
wait
echo "builds $(( $(date +%s)-t0 )) s"
timeout 150 build-D/tests/test_gpu --gtest_filter='ShortTiles.Rung23*:*k23*:*23*' > $R/T.txt 2>&1; echo "T rc=$? $(( $(date +%s)-t0 )) s"
grep -E "^\[  (PASSED|FAILED)|tests ran|FAILED  \]" $R/T.txt | head -12
tar czf $OUT/run113.tgz -C /tmp run113
v() { left=$(( 590 - ($(date +%s)-t0) )); [ $left -lt 30 ] && { echo "$name skipped"; return; }
  timeout $left python3 build-carry/variants.py --rounds 6 "$@" > $R/v_$name.txt 2>&1; echo "$name rc=$? $(( $(date +%s)-t0 )) s"
  tar czf $OUT/run113.tgz -C /tmp run113; }
L3=A=/tmp/srcA/build/libflash_ladder.so,B=/tmp/srcB/build/libflash_ladder.so,D=build-D/libflash_ladder.so
L256=A=/tmp/srcA/build/libflash_ladder.so,C=/tmp/srcC/build/libflash_ladder.so,D=build-D/libflash_ladder.so
name=d128 v --libs $L3 --d 128 --n 512,1024,2048,4096 --out $R/v_d128.json
name=d256 v --libs $L256 --d 256 --n 1024,2048,4096 --out $R/v_d256.json
name=d64 v --libs $L3 --d 64 --n 512,2048 --out $R/v_d64.json
name=d128c v --libs $L3 --d 128 --causal --n 1024,4096 --out $R/v_d128c.json
python3 - <<'PY'
import json, glob, statistics as st
for f in sorted(glob.glob('/tmp/run113/v_*.json')):
    for r in json.load(open(f)):
        ra = r['runs']; t = r['tflops']
        names = [k for k in ra if k not in ('cudnn', 'fa2', 'A')]
        s = ' '.join('%s/A %.3f' % (n, st.median([m/a for m, a in zip(ra[n], ra['A'])])) for n in names)
        c = ' '.join('%s/cudnn %.3f' % (n, st.median([m/a for m, a in zip(ra[n], ra['cudnn'])])) for n in ['A'] + names)
        print(f.split('/')[-1][2:-5], r['N'], s, '|', c, r['ok'])
PY
