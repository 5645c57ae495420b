#!/usr/bin/env bash
# Device run 49: rung 23 variants. A: HEAD (base23.cu); S: O's rescale skipped when no row max of
# the warp moved, Bc = 80 at d = 256; T: S + the row max as four chains; E: T + the rescale placed
# between the S and the P.V issues (the default build).
set -uo pipefail
R=/tmp/run49; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
mkdir -p /tmp/srcA && tar --exclude='./build*' -cf - . | tar -xf - -C /tmp/srcA && cp build-carry/base23.cu /tmp/srcA/kernels/23_final_hopper/final_hopper.cu
build() {  # name srcdir flags targets...
  local n=$1 src=$2 f=$3; shift 3
  cmake -S $src -B build-$n -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DFL_KERNELS=23 "-DCMAKE_CUDA_FLAGS=$f" >/dev/null 2>&1 || { echo "cmake $n failed"; return 1; }
  cmake --build build-$n -j 16 --target "$@" >$R/build_$n.log 2>&1 || { grep -E -A5 "error" $R/build_$n.log | head -30; return 1; }
}
build A /tmp/srcA "" flash_ladder
build S . "-DFL23_TREE=0 -DFL23_EARLY=0" flash_ladder
build T . "-DFL23_EARLY=0" flash_ladder test_gpu
build E . "" flash_ladder test_gpu
echo "builds $(( $(date +%s)-t0 )) s"
for v in E T; do
  timeout 200 ./build-$v/tests/test_gpu --gtest_filter='*23_final_hopper*:ShortTiles.Rung23*' >$R/test_$v.log 2>&1; echo "test $v rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $R/test_$v.log | head -8
done
echo "tests $(( $(date +%s)-t0 )) s"
L=A=build-A/libflash_ladder.so,S=build-S/libflash_ladder.so,T=build-T/libflash_ladder.so,E=build-E/libflash_ladder.so
V="python3 build-carry/variants.py --libs $L --out $R/variants.json --rounds 3"
$V --d 128 2>&1 | tee -a $R/variants.txt | grep "^d="
$V --d 128 --causal 2>&1 | tee -a $R/variants.txt | grep "^d="
$V --d 256 --n 1024,2048,4096,8192 2>&1 | tee -a $R/variants.txt | grep "^d="
$V --d 256 --n 1024,2048,4096,8192 --causal 2>&1 | tee -a $R/variants.txt | grep "^d="
$V --d 64 --n 1024,4096,16384 2>&1 | tee -a $R/variants.txt | grep "^d="
echo "total $(( $(date +%s)-t0 )) s"
tar czf $OUT/run49.tgz -C /tmp run49
