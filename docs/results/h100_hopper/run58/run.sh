#!/usr/bin/env bash
# Device run 58: rung 23 with the item's steps compiled for whole and split items (N) against HEAD
# f5ff6d6 (A): GPU tests of 23 + ShortTiles, sanitizer, A/N 8 rounds, N + 1 for N.
set -uo pipefail
R=/tmp/run58; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
mkdir -p /tmp/srcA && tar --exclude='./build*' -cf - . | tar -xf - -C /tmp/srcA
cp build-carry/base23_f5ff6d6.cu /tmp/srcA/kernels/23_final_hopper/final_hopper.cu
cp build-carry/schedule_f5ff6d6.cuh /tmp/srcA/kernels/23_final_hopper/schedule.cuh
build() {  # name srcdir kernels targets...
  local n=$1 src=$2 k=$3; shift 3
  cmake -S $src -B build-$n -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=$k" >/dev/null 2>&1 || { echo "cmake $n failed"; return 1; }
  cmake --build build-$n -j 8 --target "$@" >$R/build_$n.log 2>&1 || { grep -E -A5 "error" $R/build_$n.log | head -30; return 1; }
}
build N . "16;23" flash_ladder test_gpu ladder &
build A /tmp/srcA "23" flash_ladder &
wait
echo "builds $(( $(date +%s)-t0 )) s"
timeout 200 ./build-N/tests/test_gpu --gtest_filter='*23_final_hopper*:ShortTiles.*' >$R/gpu23.log 2>&1; echo "gpu23 rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]|Failure" $R/gpu23.log | head -20
V="python3 build-carry/variants.py --libs A=build-A/libflash_ladder.so,N=build-N/libflash_ladder.so --rounds 8"
timeout 120 $V --d 128 --n 4096,8192 --out $R/variants_d128.json 2>&1 | tee $R/variants.txt | grep "^d="
timeout 80 $V --d 128 --n 4096 --causal --out $R/variants_d128c.json 2>&1 | tee -a $R/variants.txt | grep "^d="
timeout 60 $V --d 128 --n 512,1024 --out $R/variants_d128s.json 2>&1 | tee -a $R/variants.txt | grep "^d="
echo "t $(( $(date +%s)-t0 )) s"
P="python3 scripts/plus1_bench.py --kernel 23 --pairs 16:2048,16:4096 --causal-pairs 16:2048,16:4096 --rounds 6 --repeats 15"
timeout 100 $P --lib build-N/libflash_ladder.so --out $R/plus1_new.json >$R/plus1_new.txt 2>&1; grep "^| " $R/plus1_new.txt
echo "t $(( $(date +%s)-t0 )) s"
rm -f build-N/ladder.bak; timeout 150 scripts/sanitize.sh --build build-N --out $R/sanitize >$R/sanitize.txt 2>&1; echo "sanitize rc=$?"; tail -2 $R/sanitize.txt
echo "total $(( $(date +%s)-t0 )) s"
python3 - <<'PY'
import json,glob,statistics
for f in sorted(glob.glob('/tmp/run58/variants_*.json')):
    for r in json.load(open(f)):
        a,n=r['runs']['A'],r['runs']['N']
        ratios=[x/y for x,y in zip(n,a)]
        print(f.split('_')[-1], r['N'], r['causal'], 'N/A per round', [round(x,3) for x in ratios], 'median', round(statistics.median(ratios),3))
PY
tar czf $OUT/run58.tgz -C /tmp run58
