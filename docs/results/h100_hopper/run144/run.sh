#!/usr/bin/env bash
# Device run 144: R = a diagnostic build (wrong results on purpose): a non-causal item of at most 64 rows (N + 1's
# one-row item of each head) visits half of its KV tiles, both consumers in their turns: what splitting that
# item's keys between the two consumers could at best save, before the merge. Against A (HEAD), balanced, 12
# rounds; at N = 2048 and 4096 R computes what A does (a null check of the two builds).
set -uo pipefail
R=/tmp/run144; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
cp build-carry/runCV.sh $R/run.sh
mk() { rm -rf /tmp/src$1; mkdir -p /tmp/src$1 && tar cf - --exclude=./build --exclude=./build-* . | tar xf - -C /tmp/src$1
  [ -f build-carry/v144/$1.cu ] && cp build-carry/v144/$1.cu /tmp/src$1/kernels/23_final_hopper/final_hopper.cu
  [ -f build-carry/v144/$1.cuh ] && cp build-carry/v144/$1.cuh /tmp/src$1/kernels/23_final_hopper/schedule.cuh
  cmake -S /tmp/src$1 -B /tmp/src$1/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
  cmake --build /tmp/src$1/build -j 8 --target flash_ladder $2 > $R/build_$1.log 2>&1 || grep -E -A5 "error" $R/build_$1.log | head -30; }
mk A "" & mk R "" &
wait
echo "builds $(( $(date +%s)-t0 )) s"
echo "tests $(( $(date +%s)-t0 )) s"
tar czf $OUT/run144.tgz -C /tmp run144
v() { left=$(( 585 - ($(date +%s)-t0) )); [ $left -lt 30 ] && { echo "$name skipped"; return; }
  timeout $left python3 build-carry/variants.py --order balanced --rounds 12 "$@" > $R/v_$name.txt 2>&1; echo "$name rc=$? $(( $(date +%s)-t0 )) s"
  tar czf $OUT/run144.tgz -C /tmp run144; }
L=A=/tmp/srcA/build/libflash_ladder.so,R=/tmp/srcR/build/libflash_ladder.so
name=d128 v --libs $L --d 128 --n 2048,2049,4096,4097 --b 16 --out $R/v_d128.json
name=d256 v --libs $L --d 256 --n 2048,2049 --b 16 --out $R/v_d256.json
python3 - <<'PY'
import json, glob, statistics as st
for f in sorted(glob.glob('/tmp/run144/v_*.json')):
    for r in json.load(open(f)):
        ra = r['runs']
        cells = ['%s/A %.3f' % (X, st.median([m/a for m, a in zip(ra[X], ra['A'])])) for X in ('R',) if X in ra]
        print(f.split('/')[-1][2:-5], r['N'], *cells, 'A/cudnn %.3f' % st.median([m/a for m, a in zip(ra['A'], ra['cudnn'])]), 'R/cudnn %.3f' % st.median([m/a for m, a in zip(ra['R'], ra['cudnn'])]), r['ok'])
PY
tar czf $OUT/run144.tgz -C /tmp run144
