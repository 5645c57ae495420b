#!/usr/bin/env bash
# Device run 90: how many clusters of two fit (cudaOccupancyMaxActiveClusters), and M with the grid at
# SMs / 2 clusters (M66) against M (the occupancy's count) and A (HEAD 216ba15).
set -uo pipefail
R=/tmp/run90; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
mkdir -p /tmp/srcA /tmp/srcS && tar cf - --exclude=./build --exclude=./build-* . | tar xf - -C /tmp/srcA
tar cf - --exclude=./build --exclude=./build-* . | tar xf - -C /tmp/srcS
cp build-carry/base89/final_hopper.cu build-carry/base89/schedule.cuh /tmp/srcA/kernels/23_final_hopper/
for x in "/tmp/srcA/build /tmp/srcA -DX" "/tmp/srcS/build /tmp/srcS -DFL23_CLUSTERS_SMS" "build-M . -DFL23_PRINT_CLUSTERS"; do set -- $x
  ( cmake -S $2 -B $1 -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" "-DCMAKE_CUDA_FLAGS=$3" >/dev/null 2>&1
    cmake --build $1 -j 5 --target flash_ladder > $R/build_$(basename $2).log 2>&1 || tail -20 $R/build_$(basename $2).log ) &
done; wait
echo "builds $(( $(date +%s)-t0 )) s"
LIBS=A=/tmp/srcA/build/libflash_ladder.so,M=build-M/libflash_ladder.so,M66=/tmp/srcS/build/libflash_ladder.so
v() { left=$(( 585 - ($(date +%s)-t0) )); [ $left -lt 30 ] && return
  timeout $left python3 build-carry/variants.py --libs $LIBS --rounds 6 "$@" > $R/v_$name.txt 2>&1; echo "$name rc=$? $(( $(date +%s)-t0 )) s"
  tar czf $OUT/run90.tgz -C /tmp run90; }
name=d128 v --d 128 --n 512,4096,8192 --out $R/v_d128.json
grep FL23 $R/v_d128.txt | sort | uniq
name=d64 v --d 64 --n 2048,4096 --out $R/v_d64.json
name=d128c v --d 128 --causal --n 2048,4096 --out $R/v_d128c.json
cp build-carry/runAT.sh $R/run.sh
tar czf $OUT/run90.tgz -C /tmp run90
python3 - <<'PY'
import json, glob, statistics as st
for f in sorted(glob.glob('/tmp/run90/v_*.json')):
    for r in json.load(open(f)):
        ra = r['runs']
        print(f.split('/')[-1][2:-5], r['N'], 'A/cudnn %.3f' % st.median([a/c for a, c in zip(ra['A'], ra['cudnn'])]),
              ' '.join(f"{k}/A {st.median([m/a for m, a in zip(ra[k], ra['A'])]):.3f}" for k in ('M', 'M66')), r['ok'])
PY
