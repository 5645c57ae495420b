#!/usr/bin/env bash
# Device run 48: rung 23 variants (A: committed, O rescaled every tile; B: rescale skipped when no
# row max of the warp moved; C: B + Bc 176 at d = 128, 80 at d = 256), tests of B and C, timings.
set -uo pipefail
R=/tmp/run48; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
build() {  # name flags targets...
  local n=$1 f=$2; shift 2
  cmake -S . -B build-$n -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DFL_KERNELS=23 "-DCMAKE_CUDA_FLAGS=$f" >/dev/null 2>&1 || { echo "cmake $n failed"; return 1; }
  cmake --build build-$n -j 16 --target "$@" >$R/build_$n.log 2>&1 || { grep -E -A5 "error" $R/build_$n.log | head -30; return 1; }
}
build A "-DFL23_SKIP=0" flash_ladder
build B "" flash_ladder test_gpu
build C "-DFL23_BC128=176 -DFL23_BC256=80" flash_ladder test_gpu
echo "builds $(( $(date +%s)-t0 )) s"
for v in B C; do
  timeout 200 ./build-$v/tests/test_gpu --gtest_filter='*23_final_hopper*:ShortTiles.Rung23*' >$R/test_$v.log 2>&1; echo "test $v rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $R/test_$v.log | head -8
done
echo "tests $(( $(date +%s)-t0 )) s"
L=A=build-A/libflash_ladder.so,B=build-B/libflash_ladder.so,C=build-C/libflash_ladder.so
V="python3 build-carry/variants.py --libs $L --out $R/variants.json"
$V --d 128 2>&1 | tee -a $R/variants.txt | grep "^d="
$V --d 128 --causal 2>&1 | tee -a $R/variants.txt | grep "^d="
$V --d 256 --n 1024,2048,4096,8192 2>&1 | tee -a $R/variants.txt | grep "^d="
$V --d 256 --n 1024,2048,4096,8192 --causal 2>&1 | tee -a $R/variants.txt | grep "^d="
python3 build-carry/variants.py --libs A=build-A/libflash_ladder.so,B=build-B/libflash_ladder.so --out $R/variants.json --d 64 --n 1024,4096,16384 2>&1 | tee -a $R/variants.txt | grep "^d="
echo "total $(( $(date +%s)-t0 )) s"
tar czf $OUT/run48.tgz -C /tmp run48
