#!/usr/bin/env bash
# Rung 69: build with the tests, GPU tests, compute-sanitizer on the calls whose count moves.
set -uo pipefail
R=$OUT; mkdir -p $R/t
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
t0=$(date +%s)
( cmake -S . -B build -G Ninja -DFL_KERNELS="68;69" -DFL_BUILD_BENCH=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder test_decode test_paged test_gpu ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && { grep -E "error" $R/t/build.log | head -20; exit 1; }
timeout 200 ./build/tests/test_decode > $R/t/test_decode.txt 2>&1
echo "test_decode rc=$? $(( $(date +%s) - t0 )) s: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $R/t/test_decode.txt | tr '\n' ' ')" >> $R/summary.txt
timeout 150 ./build/tests/test_paged --gtest_filter='PagedSame.Rung69*:PagedSame.Rung68*:Cache/*:PagedLong*' > $R/t/test_paged.txt 2>&1
echo "test_paged rc=$? $(( $(date +%s) - t0 )) s: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $R/t/test_paged.txt | tr '\n' ' ')" >> $R/summary.txt
timeout 60 ./build/tests/test_gpu --gtest_filter='*k69_*' > $R/t/test_gpu.txt 2>&1
echo "test_gpu rc=$? $(( $(date +%s) - t0 )) s: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $R/t/test_gpu.txt | tr '\n' ' ')" >> $R/summary.txt
export FLASH_LADDER_LIB=$PWD/build/libflash_ladder.so
for tool in memcheck racecheck; do
  timeout 150 compute-sanitizer --tool $tool --kernel-name kns=k69_ --error-exitcode 9 python3 scripts/sanitize_cache.py --kernel 69 --d 128 --heads 32/8 --nq 16 --pages 0,64 --capacity 32768 > $R/t/san_$tool.txt 2>&1
  echo "$tool rc=$? $(( $(date +%s) - t0 )) s: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|calls' $R/t/san_$tool.txt | tr '\n' ' ')" >> $R/summary.txt
done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $R/summary.txt
cd $R && tar czf runs.tar.gz t && cd - > /dev/null
cat $R/summary.txt; grep -h -E "FAILED|Failure|error:|Expected|Which is|WRONG" $R/t/*.txt | head -40
