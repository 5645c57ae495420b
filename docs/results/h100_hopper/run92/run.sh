#!/usr/bin/env bash
# Device run 92: the tree (each consumer its own tiles at d = 64 and 256; d = 128 byte-identical to HEAD):
# full build, ctest -LE sanitize, ladder; variants.py A (HEAD 216ba15) vs G (the tree); compute-sanitizer on rung 23.
set -uo pipefail
R=/tmp/run92; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >$R/configure.log 2>&1 || { tail -30 $R/configure.log; exit 1; }
cmake --build build -j 16 >$R/build.log 2>&1 || { grep -E -A5 "error" $R/build.log | head -60; exit 1; }
echo "build $(( $(date +%s)-t0 )) s"
mkdir -p /tmp/srcA && tar cf - --exclude=./build --exclude=./build-* . | tar xf - -C /tmp/srcA
cp build-carry/base89/final_hopper.cu build-carry/base89/schedule.cuh /tmp/srcA/kernels/23_final_hopper/
( cmake -S /tmp/srcA -B /tmp/srcA/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
  cmake --build /tmp/srcA/build -j 6 --target flash_ladder > $R/build_A.log 2>&1 || tail -20 $R/build_A.log
  cmake -S . -B build-S -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
  cmake --build build-S -j 6 --target ladder > $R/build_S.log 2>&1 || tail -20 $R/build_S.log ) &
timeout 300 ctest --test-dir build --output-on-failure -j 4 --timeout 200 -LE sanitize >$R/ctest.log 2>&1; echo "ctest rc=$? $(( $(date +%s)-t0 )) s"
grep -E "tests passed|tests failed" $R/ctest.log; grep -E "^\s+[0-9]+ - .*(Failed|Timeout|Not Run)" $R/ctest.log | head -20
timeout 120 ./build/ladder >$R/ladder.txt 2>&1; echo "ladder rc=$? $(( $(date +%s)-t0 )) s"; grep -ciE "fail" $R/ladder.txt
cp build-carry/runAV.sh $R/run.sh
tar czf $OUT/run92.tgz -C /tmp run92
wait
LIBS=A=/tmp/srcA/build/libflash_ladder.so,G=build/libflash_ladder.so
v() { left=$(( 420 - ($(date +%s)-t0) )); [ $left -lt 30 ] && return
  timeout $left python3 build-carry/variants.py --libs $LIBS --rounds 6 "$@" > $R/v_$name.txt 2>&1; echo "$name rc=$? $(( $(date +%s)-t0 )) s"
  tar czf $OUT/run92.tgz -C /tmp run92; }
name=d64c v --d 64 --causal --n 1024,2048,4096,16384 --out $R/v_d64c.json
name=d256c v --d 256 --causal --n 1024,2048,4096,8192 --out $R/v_d256c.json
name=d64 v --d 64 --n 2048,4096 --out $R/v_d64.json
left=$(( 590 - ($(date +%s)-t0) ))
timeout $left scripts/sanitize.sh --build build-S --out $R/sanitize > $R/sanitize.txt 2>&1; echo "sanitize rc=$? $(( $(date +%s)-t0 )) s"
tail -3 $R/sanitize.txt
tar czf $OUT/run92.tgz -C /tmp run92
python3 - <<'PY'
import json, glob, statistics as st
for f in sorted(glob.glob('/tmp/run92/v_*.json')):
    for r in json.load(open(f)):
        ra = r['runs']
        print(f.split('/')[-1][2:-5], r['N'], 'A/cudnn %.3f' % st.median([a/c for a, c in zip(ra['A'], ra['cudnn'])]), 'G/cudnn %.3f' % st.median([a/c for a, c in zip(ra['G'], ra['cudnn'])]),
              'G/A %.3f' % st.median([m/a for m, a in zip(ra['G'], ra['A'])]), ' '.join('%.3f' % (m/a) for m, a in zip(ra['G'], ra['A'])), r['ok'])
PY
