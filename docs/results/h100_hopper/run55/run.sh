#!/usr/bin/env bash
# Device run 55: new (N) against HEAD f5ff6d6 (A), more rounds: is the main path slower?
set -uo pipefail
R=/tmp/run55; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
mkdir -p /tmp/srcA && tar --exclude='./build*' -cf - . | tar -xf - -C /tmp/srcA
cp build-carry/base23_f5ff6d6.cu /tmp/srcA/kernels/23_final_hopper/final_hopper.cu
cp build-carry/schedule_f5ff6d6.cuh /tmp/srcA/kernels/23_final_hopper/schedule.cuh
build() {  # name srcdir kernels flags targets...
  local n=$1 src=$2 k=$3 f=$4; shift 4
  cmake -S $src -B build-$n -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=$k" "-DCMAKE_CUDA_FLAGS=$f" >/dev/null 2>&1 || { echo "cmake $n failed"; return 1; }
  cmake --build build-$n -j 16 --target "$@" >$R/build_$n.log 2>&1 || { grep -E -A5 "error" $R/build_$n.log | head -30; return 1; }
}
build N . "23" "" flash_ladder &
build X . "23" "-DFL23_X" flash_ladder &
build A /tmp/srcA "23" "" flash_ladder &
wait
echo "builds $(( $(date +%s)-t0 )) s"
V="python3 build-carry/variants.py --libs A=build-A/libflash_ladder.so,N=build-N/libflash_ladder.so,X=build-X/libflash_ladder.so --rounds 6"
timeout 200 $V --d 128 --n 4096,8192 --out $R/variants_d128.json 2>&1 | tee $R/variants.txt | grep "^d="
timeout 100 $V --d 128 --n 4096 --causal --out $R/variants_d128c.json 2>&1 | tee -a $R/variants.txt | grep "^d="
timeout 100 $V --d 256 --n 8192 --out $R/variants_d256.json 2>&1 | tee -a $R/variants.txt | grep "^d="
timeout 100 $V --d 64 --n 16384 --out $R/variants_d64.json 2>&1 | tee -a $R/variants.txt | grep "^d="
echo "t $(( $(date +%s)-t0 )) s"
P="python3 scripts/plus1_bench.py --kernel 23 --pairs 16:2048 --causal-pairs 16:2048 --rounds 6 --repeats 15"
timeout 90 $P --lib build-N/libflash_ladder.so --out $R/plus1_new.json >$R/plus1_new.txt 2>&1; tail -4 $R/plus1_new.txt
timeout 90 $P --lib build-A/libflash_ladder.so --out $R/plus1_old.json >$R/plus1_old.txt 2>&1; tail -4 $R/plus1_old.txt
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv,noheader | tee -a $R/gpu.txt
echo "total $(( $(date +%s)-t0 )) s"
python3 - <<'PY'
import json,glob,statistics
for f in sorted(glob.glob('/tmp/run55/variants_*.json')):
    for r in json.load(open(f)):
        for v in 'NX':
            a,n=r['runs']['A'],r['runs'][v]
            ratios=[x/y for x,y in zip(n,a)]
            print(f.split('_')[-1], r['N'], r['causal'], v+'/A per round', [round(x,3) for x in ratios], 'median', round(statistics.median(ratios),3))
PY
tar czf $OUT/run55.tgz -C /tmp run55
