#!/usr/bin/env bash
# Device run 114: run 113 again with 8 rounds, A = HEAD (build-carry/base113), B = the next item found while the last
# P.V runs, C = B + O / l folded into the last P.V (build-carry/v113/).
set -uo pipefail
R=/tmp/run114; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
cp build-carry/runBR.sh $R/run.sh
mk() { # name file
  [ -f /tmp/src$1/build/libflash_ladder.so ] && cmp -s $2 /tmp/src$1/kernels/23_final_hopper/final_hopper.cu && return
  rm -rf /tmp/src$1; mkdir -p /tmp/src$1 && tar cf - --exclude=./build --exclude=./build-* . | tar xf - -C /tmp/src$1
  cp $2 /tmp/src$1/kernels/23_final_hopper/final_hopper.cu
  [ $1 = A ] && cp build-carry/base113/schedule.cuh /tmp/src$1/kernels/23_final_hopper/
  cmake -S /tmp/src$1 -B /tmp/src$1/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
  cmake --build /tmp/src$1/build -j 5 --target flash_ladder > $R/build_$1.log 2>&1 || tail -20 $R/build_$1.log; }
mk A build-carry/base113/final_hopper.cu &
mk B build-carry/v113/B_final_hopper.cu &
mk C build-carry/v113/C_final_hopper.cu &
wait
echo "builds $(( $(date +%s)-t0 )) s"
v() { left=$(( 590 - ($(date +%s)-t0) )); [ $left -lt 30 ] && { echo "$name skipped"; return; }
  timeout $left python3 build-carry/variants.py --rounds 8 "$@" > $R/v_$name.txt 2>&1; echo "$name rc=$? $(( $(date +%s)-t0 )) s"
  tar czf $OUT/run114.tgz -C /tmp run114; }
L=A=/tmp/srcA/build/libflash_ladder.so,B=/tmp/srcB/build/libflash_ladder.so,C=/tmp/srcC/build/libflash_ladder.so
name=d128 v --libs $L --d 128 --n 512,1024,2048,4096,8192 --out $R/v_d128.json
name=d128c v --libs $L --d 128 --causal --n 1024,2048,4096 --out $R/v_d128c.json
name=d64 v --libs $L --d 64 --n 512,1024,2048 --out $R/v_d64.json
name=d256 v --libs $L --d 256 --n 2048,4096 --out $R/v_d256.json
python3 - <<'PY'
import json, glob, statistics as st
for f in sorted(glob.glob('/tmp/run114/v_*.json')):
    for r in json.load(open(f)):
        ra = r['runs']
        names = [k for k in ra if k not in ('cudnn', 'fa2', 'A')]
        s = ' '.join('%s/A %.3f' % (n, st.median([m/a for m, a in zip(ra[n], ra['A'])])) for n in names)
        c = ' '.join('%s/cudnn %.3f' % (n, st.median([m/a for m, a in zip(ra[n], ra['cudnn'])])) for n in ['A'] + names)
        print(f.split('/')[-1][2:-5], r['N'], s, '|', c, r['ok'])
PY
