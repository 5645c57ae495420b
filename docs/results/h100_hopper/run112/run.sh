#!/usr/bin/env bash
# Device run 112: D (the tree, e6760e6) against A (96baec1, build-carry/base104) once more, 8 rounds, where runs 108-111
# had D behind: d = 256 N = 2048 (and 4096), d = 128 causal N = 2048 and 4096, d = 64 causal N = 2048.
set -uo pipefail
R=/tmp/run112; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
cp build-carry/runBP.sh $R/run.sh
mkdir -p /tmp/srcA && tar cf - --exclude=./build --exclude=./build-* . | tar xf - -C /tmp/srcA
cp build-carry/base104/final_hopper.cu build-carry/base104/schedule.cuh /tmp/srcA/kernels/23_final_hopper/
( cmake -S /tmp/srcA -B /tmp/srcA/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
  cmake --build /tmp/srcA/build -j 8 --target flash_ladder > $R/build_A.log 2>&1 || tail -20 $R/build_A.log ) &
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
cmake --build build -j 8 --target flash_ladder > $R/build.log 2>&1 || tail -20 $R/build.log
wait
echo "builds $(( $(date +%s)-t0 )) s"
LIBS=A=/tmp/srcA/build/libflash_ladder.so,D=build/libflash_ladder.so
v() { left=$(( 585 - ($(date +%s)-t0) )); [ $left -lt 30 ] && return
  timeout $left python3 build-carry/variants.py --libs $LIBS --rounds 8 "$@" > $R/v_$name.txt 2>&1; echo "$name rc=$? $(( $(date +%s)-t0 )) s"
  tar czf $OUT/run112.tgz -C /tmp run112; }
name=d256 v --d 256 --n 2048,4096 --out $R/v_d256.json
name=d128c v --d 128 --causal --n 2048,4096 --out $R/v_d128c.json
name=d64c v --d 64 --causal --n 2048 --out $R/v_d64c.json
python3 - <<'PY'
import json, glob, statistics as st
for f in sorted(glob.glob('/tmp/run112/v_*.json')):
    for r in json.load(open(f)):
        ra = r['runs']; t = r['tflops']
        print(f.split('/')[-1][2:-5], r['N'], 'A %.0f D %.0f cudnn %.0f' % (t['A'], t['D'], t['cudnn']),
              'D/A %.3f' % st.median([m/a for m, a in zip(ra['D'], ra['A'])]), [round(m/a, 3) for m, a in zip(ra['D'], ra['A'])], r['ok'])
PY
