#!/usr/bin/env bash
# Device run 123: E1 (build-carry/v121/E1.cu: the next item found and the row sums inverted while the last P.V runs)
# against A (the tree), the two alone in one process, 8 rounds: run 121's cells again, with B's weak cell (causal 1024).
set -uo pipefail
R=/tmp/run123; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
cp build-carry/runCA.sh $R/run.sh
rm -rf /tmp/srcE1; mkdir -p /tmp/srcE1 && tar cf - --exclude=./build --exclude=./build-* . | tar xf - -C /tmp/srcE1
cp build-carry/v121/E1.cu /tmp/srcE1/kernels/23_final_hopper/final_hopper.cu
( cmake -S /tmp/srcE1 -B /tmp/srcE1/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
  cmake --build /tmp/srcE1/build -j 8 --target flash_ladder > $R/build_E1.log 2>&1 || grep -E -A5 "error" $R/build_E1.log | head -30 ) &
[ -f build/build.ninja ] || cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
cmake --build build -j 8 --target flash_ladder > $R/build_A.log 2>&1 || tail -20 $R/build_A.log
wait
echo "builds $(( $(date +%s)-t0 )) s"
v() { left=$(( 570 - ($(date +%s)-t0) )); [ $left -lt 30 ] && { echo "$name skipped"; return; }
  timeout $left python3 build-carry/variants.py --rounds 8 "$@" > $R/v_$name.txt 2>&1; echo "$name rc=$? $(( $(date +%s)-t0 )) s"
  tar czf $OUT/run123.tgz -C /tmp run123; }
L=A=build/libflash_ladder.so,E1=/tmp/srcE1/build/libflash_ladder.so
name=d128 v --libs $L --d 128 --n 512,1024,2048,4096 --b 16 --out $R/v_d128.json
name=d128c v --libs $L --d 128 --causal --n 1024,2048,4096 --b 16 --out $R/v_d128c.json
name=d64 v --libs $L --d 64 --n 512,1024,4096 --b 16 --out $R/v_d64.json
name=d64c v --libs $L --d 64 --causal --n 2048 --b 16 --out $R/v_d64c.json
name=d256 v --libs $L --d 256 --n 2048,4096 --b 16 --out $R/v_d256.json
python3 - <<'PY'
import json, glob, statistics as st
for f in sorted(glob.glob('/tmp/run123/v_*.json')):
    for r in json.load(open(f)):
        ra = r['runs']; x = [m/a for m, a in zip(ra['E1'], ra['A'])]
        print(f.split('/')[-1][2:-5], r['N'], 'E1/A %.3f' % st.median(x), 'A/cudnn %.3f E1/cudnn %.3f' % (st.median([m/a for m, a in zip(ra['A'], ra['cudnn'])]), st.median([m/a for m, a in zip(ra['E1'], ra['cudnn'])])), [round(y, 3) for y in x], r['ok'])
PY
tar czf $OUT/run123.tgz -C /tmp run123
