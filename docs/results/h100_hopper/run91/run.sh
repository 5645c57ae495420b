#!/usr/bin/env bash
# Device run 91: each consumer visits only the tiles its own 64 rows see (P, the tree) against the
# kernel of HEAD 216ba15 (A): rung 23's GPU tests and ShortTiles on P; variants.py, 6 rounds.
set -uo pipefail
R=/tmp/run91; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
mkdir -p /tmp/srcA && tar cf - --exclude=./build --exclude=./build-* . | tar xf - -C /tmp/srcA
cp build-carry/base89/final_hopper.cu build-carry/base89/schedule.cuh /tmp/srcA/kernels/23_final_hopper/
( cmake -S /tmp/srcA -B /tmp/srcA/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
  cmake --build /tmp/srcA/build -j 6 --target flash_ladder > $R/build_A.log 2>&1 || tail -20 $R/build_A.log ) &
cmake -S . -B build-T -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=16;23" >/dev/null 2>&1
cmake --build build-T -j 10 --target flash_ladder test_gpu > $R/build_T.log 2>&1 || { grep -E -A5 "error" $R/build_T.log | head -40; exit 1; }
wait
echo "builds $(( $(date +%s)-t0 )) s"
timeout 240 ./build-T/tests/test_gpu --gtest_filter='*23_final_hopper*:ShortTiles.*' >$R/gpu23.log 2>&1; echo "gpu23 rc=$? $(( $(date +%s)-t0 )) s"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $R/gpu23.log | head -20
cp build-carry/runAU.sh $R/run.sh
tar czf $OUT/run91.tgz -C /tmp run91
grep -q "FAILED" $R/gpu23.log && exit 1
LIBS=A=/tmp/srcA/build/libflash_ladder.so,P=build-T/libflash_ladder.so
v() { left=$(( 585 - ($(date +%s)-t0) )); [ $left -lt 30 ] && return
  timeout $left python3 build-carry/variants.py --libs $LIBS --rounds 6 "$@" > $R/v_$name.txt 2>&1; echo "$name rc=$? $(( $(date +%s)-t0 )) s"
  tar czf $OUT/run91.tgz -C /tmp run91; }
name=d64c v --d 64 --causal --n 1024,2048,4096,8192,16384 --out $R/v_d64c.json
name=d256c v --d 256 --causal --n 1024,2048,4096,8192 --out $R/v_d256c.json
name=d128c v --d 128 --causal --n 2048,4096,8192 --out $R/v_d128c.json
name=d64 v --d 64 --n 2048,4096,8192 --out $R/v_d64.json
name=d128 v --d 128 --n 1024,4096,4097,8192 --out $R/v_d128.json
python3 - <<'PY'
import json, glob, statistics as st
for f in sorted(glob.glob('/tmp/run91/v_*.json')):
    for r in json.load(open(f)):
        ra = r['runs']
        print(f.split('/')[-1][2:-5], r['N'], 'A/cudnn %.3f' % st.median([a/c for a, c in zip(ra['A'], ra['cudnn'])]), 'P/cudnn %.3f' % st.median([a/c for a, c in zip(ra['P'], ra['cudnn'])]),
              'P/A %.3f' % st.median([m/a for m, a in zip(ra['P'], ra['A'])]), ' '.join('%.3f' % (m/a) for m, a in zip(ra['P'], ra['A'])), r['ok'])
PY
