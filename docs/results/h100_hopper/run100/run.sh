#!/usr/bin/env bash
# Device run 100: four builds of rung 23 in one process (variants.py, alternating rounds): A = HEAD 0ece2ba; X = query
# tiles from the last row only; S = X + a narrow first visit's softmax (16 keys; the GEMMs whole: the tree); W = X + a
# narrow first visit's GEMMs and softmax (run 98's).
set -uo pipefail
R=/tmp/run100; mkdir -p $R
t0=$(date +%s)
cp build-carry/runBD.sh $R/run.sh
for v in A W X; do
  mkdir -p /tmp/src$v && tar cf - --exclude=./build --exclude=./build-* . | tar xf - -C /tmp/src$v
done
cp build-carry/base95/final_hopper.cu build-carry/base95/schedule.cuh /tmp/srcA/kernels/23_final_hopper/
cp build-carry/nar11/final_hopper.cu build-carry/nar11/schedule.cuh /tmp/srcW/kernels/23_final_hopper/
sed -i 's/const bool narrow = mine.first_keys <= kNarrowKeys;/const bool narrow = false \&\& mine.first_keys <= kNarrowKeys;/' /tmp/srcX/kernels/23_final_hopper/final_hopper.cu
grep -c "narrow = false" /tmp/srcX/kernels/23_final_hopper/final_hopper.cu
for v in A W X; do
( cmake -S /tmp/src$v -B /tmp/src$v/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
  cmake --build /tmp/src$v/build -j 4 --target flash_ladder > $R/build_$v.log 2>&1 || tail -20 $R/build_$v.log ) &
done
cmake -S . -B build-T -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
cmake --build build-T -j 4 --target flash_ladder > $R/build_T.log 2>&1 || tail -20 $R/build_T.log
wait
echo "builds $(( $(date +%s)-t0 )) s"
LIBS=A=/tmp/srcA/build/libflash_ladder.so,X=/tmp/srcX/build/libflash_ladder.so,S=build-T/libflash_ladder.so,W=/tmp/srcW/build/libflash_ladder.so
v() { left=$(( 585 - ($(date +%s)-t0) )); [ $left -lt 30 ] && return
  timeout $left python3 build-carry/variants.py --libs $LIBS --rounds 6 "$@" > $R/v_$name.txt 2>&1; echo "$name rc=$? $(( $(date +%s)-t0 )) s"
  tar czf $OUT/run100.tgz -C /tmp run100; }
name=d128 v --d 128 --n 2048,2049,4096,4097,8192 --out $R/v_d128.json
name=d128c v --d 128 --causal --n 2048,2049,4096,4097 --out $R/v_d128c.json
name=d64c v --d 64 --causal --n 2048,4096 --out $R/v_d64c.json
name=d256 v --d 256 --n 2048,4096 --out $R/v_d256.json
name=d128s v --d 128 --n 1024 --out $R/v_d128s.json
python3 - <<'PY'
import json, glob, statistics as st
for f in sorted(glob.glob('/tmp/run100/v_*.json')):
    for r in json.load(open(f)):
        ra = r['runs']; t = r['tflops']
        print(f.split('/')[-1][2:-5], r['N'], ' '.join('%s %.0f' % (k, t[k]) for k in ('A', 'X', 'S', 'W', 'cudnn') if k in t),
              ' '.join('%s/A %.3f' % (k, st.median([m/a for m, a in zip(ra[k], ra['A'])])) for k in ('X', 'S', 'W') if k in ra), r['ok'])
PY
