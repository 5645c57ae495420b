#!/usr/bin/env bash
# Device run 59: rung 23 back at f5ff6d6: its GPU tests and ShortTiles (with the edge shapes added), compute-sanitizer.
set -uo pipefail
R=/tmp/run59; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
build() {  # name srcdir kernels targets...
  local n=$1 src=$2 k=$3; shift 3
  cmake -S $src -B build-$n -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=$k" >/dev/null 2>&1 || { echo "cmake $n failed"; return 1; }
  cmake --build build-$n -j 16 --target "$@" >$R/build_$n.log 2>&1 || { grep -E -A5 "error" $R/build_$n.log | head -30; return 1; }
}
build N . "16;23" flash_ladder test_gpu ladder &
wait
echo "builds $(( $(date +%s)-t0 )) s"
timeout 200 ./build-N/tests/test_gpu --gtest_filter='*23_final_hopper*:ShortTiles.*' >$R/gpu23.log 2>&1; echo "gpu23 rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]|Failure" $R/gpu23.log | head -20
rm -f build-N/ladder.bak; timeout 150 scripts/sanitize.sh --build build-N --out $R/sanitize >$R/sanitize.txt 2>&1; echo "sanitize rc=$?"; tail -2 $R/sanitize.txt
echo "total $(( $(date +%s)-t0 )) s"
tar czf $OUT/run59.tgz -C /tmp run59

