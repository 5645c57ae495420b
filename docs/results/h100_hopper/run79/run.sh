#!/usr/bin/env bash
# Device run 79: the tree (rung 23 with units: causal pairs) — the README's two commands on the full tree
# (build, ctest -LE sanitize, ladder), then compute-sanitizer and fuzz on a build of rung 23.
set -uo pipefail
R=/tmp/run79; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >$R/configure.log 2>&1 || { tail -30 $R/configure.log; exit 1; }
(cmake -S . -B build-san -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DFL_KERNELS=23 >/dev/null 2>&1 && cmake --build build-san -j 4 --target ladder test_gpu >$R/build_san.log 2>&1 || echo "build-san failed") &
cmake --build build -j 14 >$R/build.log 2>&1 || { grep -E -A5 "error" $R/build.log | head -60; exit 1; }
echo "build $(( $(date +%s)-t0 )) s"
timeout 240 ctest --test-dir build --output-on-failure -j 4 --timeout 200 -LE sanitize >$R/ctest.log 2>&1; echo "ctest rc=$? $(( $(date +%s)-t0 )) s"
grep -E "tests passed|tests failed" $R/ctest.log; grep -E "^\s+[0-9]+ - .*(Failed|Timeout|Not Run)" $R/ctest.log | head -20
timeout 90 ./build/ladder >$R/ladder.txt 2>&1; echo "ladder rc=$? $(( $(date +%s)-t0 )) s"; grep -ciE "fail" $R/ladder.txt; tail -4 $R/ladder.txt
./build/tests/test_gpu --gtest_filter='*23_final_hopper*:ShortTiles.*' >$R/gpu23.log 2>&1; echo "gpu23 rc=$?"; grep -E "^\[  (PASSED|FAILED)" $R/gpu23.log
wait
left=$(( 560 - ($(date +%s)-t0) ))
echo "t $(( $(date +%s)-t0 )) s, left $left s"
if [ $left -gt 60 ]; then
  timeout $left scripts/sanitize.sh --build build-san --out $R/sanitize >$R/sanitize.txt 2>&1; echo "sanitize rc=$?"; tail -2 $R/sanitize.txt
fi
tar czf $OUT/run79.tgz -C /tmp run79
left=$(( 585 - ($(date +%s)-t0) ))
[ $left -gt 20 ] && { FL_FUZZ_CASES=50 BUILD=build-san OUT=$R timeout $left scripts/fuzz.sh 5 6 >$R/fuzz.txt 2>&1; echo "fuzz rc=$?"; tail -3 $R/fuzz.txt; }
cp build-carry/runAI.sh $R/run.sh
echo "total $(( $(date +%s)-t0 )) s"
tar czf $OUT/run79.tgz -C /tmp run79
