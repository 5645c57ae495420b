#!/usr/bin/env bash
# Device run 127: variants.py --order balanced (the builds rotated every two rounds, so that each follows each impl
# as often): A against A2 (a byte copy) again, then H (v121/H.cu) and E1 (v121/E1.cu) against A, 16 rounds.
set -uo pipefail
R=/tmp/run127; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
cp build-carry/runCE.sh $R/run.sh; cp build-carry/variants.py $R/
mk() { rm -rf /tmp/src$1; mkdir -p /tmp/src$1 && tar cf - --exclude=./build --exclude=./build-* . | tar xf - -C /tmp/src$1
  cp build-carry/v121/$1.cu /tmp/src$1/kernels/23_final_hopper/final_hopper.cu
  cmake -S /tmp/src$1 -B /tmp/src$1/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
  cmake --build /tmp/src$1/build -j 5 --target flash_ladder > $R/build_$1.log 2>&1 || grep -E -A5 "error" $R/build_$1.log | head -30; }
( [ -f /tmp/srcH/build/libflash_ladder.so ] && cmp -s build-carry/v121/H.cu /tmp/srcH/kernels/23_final_hopper/final_hopper.cu ) || mk H &
( [ -f /tmp/srcE1/build/libflash_ladder.so ] && cmp -s build-carry/v121/E1.cu /tmp/srcE1/kernels/23_final_hopper/final_hopper.cu ) || mk E1 &
[ -f build/build.ninja ] || cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
cmake --build build -j 6 --target flash_ladder > $R/build_A.log 2>&1 || tail -20 $R/build_A.log
mkdir -p /tmp/A2 && cp build/libflash_ladder.so /tmp/A2/ && cmp build/libflash_ladder.so /tmp/A2/libflash_ladder.so && echo "A2 is a byte copy of A"
wait
echo "builds $(( $(date +%s)-t0 )) s"
v() { left=$(( 585 - ($(date +%s)-t0) )); [ $left -lt 30 ] && { echo "$name skipped"; return; }
  timeout $left python3 build-carry/variants.py --order balanced --rounds 16 "$@" > $R/v_$name.txt 2>&1; echo "$name rc=$? $(( $(date +%s)-t0 )) s"
  tar czf $OUT/run127.tgz -C /tmp run127; }
for X in A2 H E1; do
  case $X in A2) P=/tmp/A2/libflash_ladder.so ;; *) P=/tmp/src$X/build/libflash_ladder.so ;; esac
  L=A=build/libflash_ladder.so,$X=$P
  name=${X}_d128c v --libs $L --d 128 --causal --n 4096 --b 16 --out $R/v_${X}_d128c.json
  name=${X}_d256 v --libs $L --d 256 --n 2048 --b 16 --out $R/v_${X}_d256.json
  name=${X}_d64 v --libs $L --d 64 --n 4096 --b 16 --out $R/v_${X}_d64.json
  name=${X}_d128 v --libs $L --d 128 --n 512,1024,4096 --b 16 --out $R/v_${X}_d128.json
done
python3 - <<'PY'
import json, glob, statistics as st
for f in sorted(glob.glob('/tmp/run127/v_*.json')):
    X = f.split('/')[-1].split('_')[1]
    for r in json.load(open(f)):
        ra = r['runs']; x = [m/a for m, a in zip(ra[X], ra['A'])]
        print(f.split('/')[-1][2:-5], r['N'], '%s/A %.3f' % (X, st.median(x)), 'A/cudnn %.3f' % st.median([m/a for m, a in zip(ra['A'], ra['cudnn'])]), [round(y, 3) for y in x], r['ok'])
PY
tar czf $OUT/run127.tgz -C /tmp run127
