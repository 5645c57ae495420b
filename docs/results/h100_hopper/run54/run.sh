#!/usr/bin/env bash
# Device run 54 (after run 53: Q loaded per consumer, narrow P.V in a peeled step, no warpgroup-dependent exit from the item loop, wg through redux.sync): rung 23 with short items (narrow first visit, split items). New tree (rungs 16, 23)
# and A = HEAD f5ff6d6's rung 23; GPU tests of 23 and ShortTiles; N + 1 for new and A; new against A
# at d = 128 with cuDNN and FA2; compute-sanitizer on rung 23.
set -uo pipefail
R=/tmp/run54; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
mkdir -p /tmp/srcA && tar --exclude='./build*' -cf - . | tar -xf - -C /tmp/srcA
cp build-carry/base23_f5ff6d6.cu /tmp/srcA/kernels/23_final_hopper/final_hopper.cu
cp build-carry/schedule_f5ff6d6.cuh /tmp/srcA/kernels/23_final_hopper/schedule.cuh
build() {  # name srcdir kernels targets...
  local n=$1 src=$2 k=$3; shift 3
  cmake -S $src -B build-$n -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=$k" >/dev/null 2>&1 || { echo "cmake $n failed"; return 1; }
  cmake --build build-$n -j 16 --target "$@" >$R/build_$n.log 2>&1 || { grep -E -A5 "error" $R/build_$n.log | head -30; return 1; }
}
build N . "16;23" flash_ladder test_gpu ladder || exit 1
build A /tmp/srcA "23" flash_ladder || exit 1
echo "builds $(( $(date +%s)-t0 )) s"
timeout 200 ./build-N/tests/test_gpu --gtest_filter='*23_final_hopper*:ShortTiles.*' >$R/gpu23.log 2>&1; echo "gpu23 rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]|Failure" $R/gpu23.log | head -20
echo "t $(( $(date +%s)-t0 )) s"
P="python3 scripts/plus1_bench.py --kernel 23 --pairs 16:2048,16:4096 --causal-pairs 16:2048,16:4096 --rounds 4 --repeats 15"
timeout 120 $P --lib build-N/libflash_ladder.so --out $R/plus1_new.json >$R/plus1_new.txt 2>&1; echo "plus1 new rc=$?"; tail -7 $R/plus1_new.txt
timeout 120 $P --lib build-A/libflash_ladder.so --out $R/plus1_old.json >$R/plus1_old.txt 2>&1; echo "plus1 old rc=$?"; tail -7 $R/plus1_old.txt
echo "t $(( $(date +%s)-t0 )) s"
V="python3 build-carry/variants.py --libs A=build-A/libflash_ladder.so,N=build-N/libflash_ladder.so --rounds 2 --n 2048,4096,8192,16384"
timeout 100 $V --d 128 --out $R/variants_d128.json 2>&1 | tee $R/variants.txt | grep "^d="
timeout 100 $V --d 128 --causal --out $R/variants_d128c.json 2>&1 | tee -a $R/variants.txt | grep "^d="
timeout 60 $V --d 256 --n 2048,8192 --out $R/variants_d256.json 2>&1 | tee -a $R/variants.txt | grep "^d="
timeout 60 $V --d 64 --n 4096,16384 --out $R/variants_d64.json 2>&1 | tee -a $R/variants.txt | grep "^d="
echo "t $(( $(date +%s)-t0 )) s"
timeout 170 scripts/sanitize.sh --build build-N --out $R/sanitize >$R/sanitize.txt 2>&1; echo "sanitize rc=$?"; tail -3 $R/sanitize.txt
echo "total $(( $(date +%s)-t0 )) s"
tar czf $OUT/run54.tgz -C /tmp run54
