#!/usr/bin/env bash
# Call 1: build 64;65 (tests) and 65;66 (trial lib) at once; test_paged, test_decode k65; paged_bench d=64.
set -uo pipefail
R=$OUT; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv | tee $R/gpu.txt
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
cp -r build-carry/tried/66_decode_lone_half kernels/
t0=$(date +%s)
( cmake -S . -B build -G Ninja -DFL_KERNELS="64;65" -DFL_BUILD_BENCH=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 10 --target flash_ladder test_paged test_decode ) > $R/build.log 2>&1 &
p1=$!
( cmake -S . -B build66 -G Ninja -DFL_KERNELS="65;66" -DFL_BUILD_BENCH=OFF -DFL_BUILD_TESTS=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build66 -j 6 --target flash_ladder ) > $R/build66.log 2>&1 &
p2=$!
wait $p1; b1=$?; echo "build rc=$b1 $(( $(date +%s) - t0 )) s" | tee -a $R/summary.txt
[ $b1 -ne 0 ] && { grep -E -A6 "error|FAILED" $R/build.log | head -40; }
t1=$(date +%s)
timeout 300 ./build/tests/test_paged --gtest_filter='-PagedRules.*' > $R/test_paged.log 2>&1; echo "test_paged rc=$? $(( $(date +%s) - t1 )) s: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $R/test_paged.log | tr '\n' ' ')" | tee -a $R/summary.txt
grep -E "^\[  FAILED  \]|Failure|Expected|Which is" $R/test_paged.log | head -20
timeout 60 ./build/tests/test_decode --gtest_filter='*65*' > $R/test_decode.log 2>&1; echo "test_decode *65* rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' $R/test_decode.log | tr '\n' ' ')" | tee -a $R/summary.txt
wait $p2; echo "build66 rc=$? $(( $(date +%s) - t0 )) s" | tee -a $R/summary.txt
export FLASH_LADDER_LIB=$PWD/build/libflash_ladder.so
t2=$(date +%s)
PYTHONUNBUFFERED=1 timeout 200 python3 scripts/paged_bench.py --ragged --kernels 64,65 --d 64 --b 1,8 --nk 32768 --pages 16,64,256 --rounds 3 --out $R/paged.json > $R/paged.txt 2>&1; echo "paged_bench rc=$? $(( $(date +%s) - t2 )) s" | tee -a $R/summary.txt
tail -25 $R/paged.txt
cat $R/summary.txt
