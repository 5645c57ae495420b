#!/usr/bin/env bash
# Device run 101: the tree (rung 23: query tiles counted from the last row; a narrow first visit's softmax): full build,
# ctest -LE sanitize, ladder, scripts/sanitize.sh on rung 23, scripts/fuzz.sh 5 6; plus1_bench (run 80's command) on
# the tree and on A (HEAD 0ece2ba).
set -uo pipefail
R=/tmp/run101; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
cp build-carry/runBE.sh $R/run.sh
mkdir -p /tmp/srcA && tar cf - --exclude=./build --exclude=./build-* . | tar xf - -C /tmp/srcA
cp build-carry/base95/final_hopper.cu build-carry/base95/schedule.cuh /tmp/srcA/kernels/23_final_hopper/
( cmake -S /tmp/srcA -B /tmp/srcA/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
  cmake --build /tmp/srcA/build -j 2 --target flash_ladder > $R/build_A.log 2>&1 || tail -20 $R/build_A.log
  cmake -S . -B build-S -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
  cmake --build build-S -j 2 --target ladder test_gpu > $R/build_S.log 2>&1 || tail -20 $R/build_S.log ) &
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >$R/configure.log 2>&1 || { tail -30 $R/configure.log; exit 1; }
cmake --build build -j 14 >$R/build.log 2>&1 || { grep -E -A5 "error" $R/build.log | head -60; exit 1; }
echo "build $(( $(date +%s)-t0 )) s"
timeout 240 ctest --test-dir build --output-on-failure -j 4 --timeout 200 -LE sanitize >$R/ctest.log 2>&1; echo "ctest rc=$? $(( $(date +%s)-t0 )) s"
grep -E "tests passed|tests failed" $R/ctest.log; grep -E "^\s+[0-9]+ - .*(Failed|Timeout|Not Run)" $R/ctest.log | head -20
timeout 120 ./build/ladder >$R/ladder.txt 2>&1; echo "ladder rc=$? $(( $(date +%s)-t0 )) s"; grep -ciE "fail" $R/ladder.txt
tar czf $OUT/run101.tgz -C /tmp run101
wait
FL_FUZZ_CASES=50 BUILD=build-S OUT=$R timeout 100 scripts/fuzz.sh 5 6 > $R/fuzz.txt 2>&1; echo "fuzz rc=$? $(( $(date +%s)-t0 )) s"; tail -3 $R/fuzz.txt
left=$(( 400 - ($(date +%s)-t0) )); [ $left -gt 200 ] && left=200
timeout $left scripts/sanitize.sh --build build-S --out $R/sanitize > $R/sanitize.txt 2>&1; echo "sanitize rc=$? $(( $(date +%s)-t0 )) s"
tail -3 $R/sanitize.txt
tar czf $OUT/run101.tgz -C /tmp run101
P="python3 scripts/plus1_bench.py --kernel 23 --pairs 16:2048,16:4096 --causal-pairs 16:2048,16:4096 --rounds 4 --repeats 15"
left=$(( 585 - ($(date +%s)-t0) )); timeout $(( left / 2 )) $P --out $R/plus1.json > $R/plus1.txt 2>&1; echo "plus1 rc=$? $(( $(date +%s)-t0 )) s"; tail -7 $R/plus1.txt
tar czf $OUT/run101.tgz -C /tmp run101
left=$(( 590 - ($(date +%s)-t0) )); timeout $left $P --lib /tmp/srcA/build/libflash_ladder.so --out $R/plus1_A.json > $R/plus1_A.txt 2>&1; echo "plus1_A rc=$? $(( $(date +%s)-t0 )) s"; tail -7 $R/plus1_A.txt
tar czf $OUT/run101.tgz -C /tmp run101
