#!/usr/bin/env bash
# Device run 109: D (the tree: an item's O stored while the next item's first S runs, O packed to T before it) against
# A (HEAD, build-carry/base104) again, 8 rounds, where run 108 had D ahead (d = 128, N >= 2048; d = 256); the README's
# build and ctest -LE sanitize and ladder on D.
set -uo pipefail
R=/tmp/run109; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
cp build-carry/runBM.sh $R/run.sh
mkdir -p /tmp/srcA && tar cf - --exclude=./build --exclude=./build-* . | tar xf - -C /tmp/srcA
cp build-carry/base104/final_hopper.cu build-carry/base104/schedule.cuh /tmp/srcA/kernels/23_final_hopper/
( cmake -S /tmp/srcA -B /tmp/srcA/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
  cmake --build /tmp/srcA/build -j 2 --target flash_ladder > $R/build_A.log 2>&1 || tail -20 $R/build_A.log ) &
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >$R/configure.log 2>&1 || { tail -30 $R/configure.log; exit 1; }
cmake --build build -j 14 >$R/build.log 2>&1 || { grep -E -A5 "error" $R/build.log | head -60; exit 1; }
echo "build $(( $(date +%s)-t0 )) s"
timeout 240 ctest --test-dir build --output-on-failure -j 4 --timeout 200 -LE sanitize >$R/ctest.log 2>&1; echo "ctest rc=$? $(( $(date +%s)-t0 )) s"
grep -E "tests passed|tests failed" $R/ctest.log; grep -E "^\s+[0-9]+ - .*(Failed|Timeout|Not Run)" $R/ctest.log | head -20
timeout 120 ./build/ladder >$R/ladder.txt 2>&1; echo "ladder rc=$? $(( $(date +%s)-t0 )) s"; grep -ciE "fail" $R/ladder.txt
tar czf $OUT/run109.tgz -C /tmp run109
wait
LIBS=A=/tmp/srcA/build/libflash_ladder.so,D=build/libflash_ladder.so
v() { left=$(( 585 - ($(date +%s)-t0) )); [ $left -lt 30 ] && return
  timeout $left python3 build-carry/variants.py --libs $LIBS --rounds 8 "$@" > $R/v_$name.txt 2>&1; echo "$name rc=$? $(( $(date +%s)-t0 )) s"
  tar czf $OUT/run109.tgz -C /tmp run109; }
name=d128 v --d 128 --n 2048,4096,8192,16384 --out $R/v_d128.json
name=d256 v --d 256 --n 2048,4096,8192 --out $R/v_d256.json
name=d128c v --d 128 --causal --n 4096,8192 --out $R/v_d128c.json
name=d64 v --d 64 --n 2048,4096 --out $R/v_d64.json
python3 - <<'PY'
import json, glob, statistics as st
for f in sorted(glob.glob('/tmp/run109/v_*.json')):
    for r in json.load(open(f)):
        ra = r['runs']; t = r['tflops']
        print(f.split('/')[-1][2:-5], r['N'], 'A %.0f D %.0f cudnn %.0f' % (t['A'], t['D'], t['cudnn']),
              'D/A %.3f D/cudnn %.3f A/cudnn %.3f' % (st.median([m/a for m, a in zip(ra['D'], ra['A'])]), st.median([m/a for m, a in zip(ra['D'], ra['cudnn'])]), st.median([m/a for m, a in zip(ra['A'], ra['cudnn'])])), r['ok'])
PY
