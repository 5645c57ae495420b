#!/usr/bin/env bash
# Device run 137: run 135's sweep read the tree's rung 23 (F: Wh with its steps in a first_visit lambda and one
# redux for the warpgroup index) 2-4% below run 128's at d = 128, N >= 4096. A (HEAD) / F / Wh in one process,
# variants.py --order balanced, 12 rounds.
set -uo pipefail
R=/tmp/run137; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
cp build-carry/runCO.sh $R/run.sh
mk() { rm -rf /tmp/src$1; mkdir -p /tmp/src$1 && tar cf - --exclude=./build --exclude=./build-* . | tar xf - -C /tmp/src$1
  cp build-carry/v137/$1.cu /tmp/src$1/kernels/23_final_hopper/final_hopper.cu
  cmake -S /tmp/src$1 -B /tmp/src$1/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
  cmake --build /tmp/src$1/build -j 5 --target flash_ladder > $R/build_$1.log 2>&1 || grep -E -A5 "error" $R/build_$1.log | head -30; }
mk A & mk F & mk Wh &
wait
echo "builds $(( $(date +%s)-t0 )) s"
v() { left=$(( 580 - ($(date +%s)-t0) )); [ $left -lt 30 ] && { echo "$name skipped"; return; }
  timeout $left python3 build-carry/variants.py --order balanced --rounds 12 "$@" > $R/v_$name.txt 2>&1; echo "$name rc=$? $(( $(date +%s)-t0 )) s"
  tar czf $OUT/run137.tgz -C /tmp run137; }
L=A=/tmp/srcA/build/libflash_ladder.so,F=/tmp/srcF/build/libflash_ladder.so,Wh=/tmp/srcWh/build/libflash_ladder.so
name=d128 v --libs $L --d 128 --n 1024,2048,4096,8192 --b 16 --out $R/v_d128.json
name=d128c v --libs $L --d 128 --causal --n 4096 --b 16 --out $R/v_d128c.json
name=d256 v --libs $L --d 256 --n 2048,4096 --b 16 --out $R/v_d256.json
name=d64 v --libs $L --d 64 --n 4096 --b 16 --out $R/v_d64.json
python3 - <<'PY'
import json, glob, statistics as st
for f in sorted(glob.glob('/tmp/run137/v_*.json')):
    for r in json.load(open(f)):
        ra = r['runs']
        cells = ['%s/A %.3f' % (X, st.median([m/a for m, a in zip(ra[X], ra['A'])])) for X in ('F', 'Wh') if X in ra]
        print(f.split('/')[-1][2:-5], r['N'], *cells, 'A/cudnn %.3f' % st.median([m/a for m, a in zip(ra['A'], ra['cudnn'])]), 'F/cudnn %.3f' % st.median([m/a for m, a in zip(ra['F'], ra['cudnn'])]), r['ok'])
PY
tar czf $OUT/run137.tgz -C /tmp run137
