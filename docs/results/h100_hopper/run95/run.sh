#!/usr/bin/env bash
# Device run 95: the tree (rung 23: query tiles counted from the last row; a narrow first visit of <= 16 keys):
# full build, ctest -LE sanitize; variants.py A (HEAD 0ece2ba) vs N (the tree) on whole items and N + 1; plus1_bench A and N.
set -uo pipefail
R=/tmp/run95; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
cp build-carry/runAY.sh $R/run.sh
mkdir -p /tmp/srcA && tar cf - --exclude=./build --exclude=./build-* . | tar xf - -C /tmp/srcA
cp build-carry/base95/final_hopper.cu build-carry/base95/schedule.cuh /tmp/srcA/kernels/23_final_hopper/
( cmake -S /tmp/srcA -B /tmp/srcA/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
  cmake --build /tmp/srcA/build -j 4 --target flash_ladder > $R/build_A.log 2>&1 || tail -20 $R/build_A.log ) &
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >$R/configure.log 2>&1 || { tail -30 $R/configure.log; exit 1; }
cmake --build build -j 14 >$R/build.log 2>&1 || { grep -E -A5 "error" $R/build.log | head -60; exit 1; }
echo "build $(( $(date +%s)-t0 )) s"
timeout 240 ctest --test-dir build --output-on-failure -j 4 --timeout 200 -LE sanitize >$R/ctest.log 2>&1; echo "ctest rc=$? $(( $(date +%s)-t0 )) s"
grep -E "tests passed|tests failed" $R/ctest.log; grep -E "^\s+[0-9]+ - .*(Failed|Timeout|Not Run)" $R/ctest.log | head -20
timeout 120 ./build/ladder >$R/ladder.txt 2>&1; echo "ladder rc=$? $(( $(date +%s)-t0 )) s"; grep -ciE "fail" $R/ladder.txt
tar czf $OUT/run95.tgz -C /tmp run95
wait
LIBS=A=/tmp/srcA/build/libflash_ladder.so,N=build/libflash_ladder.so
v() { left=$(( 560 - ($(date +%s)-t0) )); [ $left -lt 30 ] && return
  timeout $left python3 build-carry/variants.py --libs $LIBS --rounds 6 "$@" > $R/v_$name.txt 2>&1; echo "$name rc=$? $(( $(date +%s)-t0 )) s"
  tar czf $OUT/run95.tgz -C /tmp run95; }
name=d128 v --d 128 --n 2048,2049,4096,4097,8192 --out $R/v_d128.json
name=d128c v --d 128 --causal --n 2048,2049,4096,4097 --out $R/v_d128c.json
name=d64c v --d 64 --causal --n 2048,2049,4096 --out $R/v_d64c.json
name=d256 v --d 256 --n 2048,4096 --out $R/v_d256.json
python3 - <<'PY'
import json, glob, statistics as st
for f in sorted(glob.glob('/tmp/run95/v_*.json')):
    for r in json.load(open(f)):
        ra = r['runs']
        print(f.split('/')[-1][2:-5], r['N'], 'A/cudnn %.3f' % st.median([a/c for a, c in zip(ra['A'], ra['cudnn'])]), 'N/cudnn %.3f' % st.median([a/c for a, c in zip(ra['N'], ra['cudnn'])]),
              'N/A %.3f' % st.median([m/a for m, a in zip(ra['N'], ra['A'])]), ' '.join('%.3f' % (m/a) for m, a in zip(ra['N'], ra['A'])), r['ok'])
PY
