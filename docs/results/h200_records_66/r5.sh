#!/usr/bin/env bash
# Call B (warm, build/ from call A): tests and compute-sanitizer on rung 66.
set -uo pipefail
R=$OUT; mkdir -p $R/j
ls build/tests/test_paged build/libflash_ladder.so || exit 3
t=$(date +%s)
timeout 200 ./build/tests/test_paged --gtest_filter='-PagedRules.*' > $R/j/test_paged.log 2>&1; echo "test_paged rc=$? $(( $(date +%s) - t )) s: $(grep -E '^\[  (PASSED|FAILED) ' $R/j/test_paged.log | tr '\n' ' ')" | tee -a $R/summary.txt
grep -E "^\[  FAILED  \]|Failure|Expected|Which is|  Actual" $R/j/test_paged.log | head -20
t=$(date +%s)
timeout 200 ./build/tests/test_decode > $R/j/test_decode.log 2>&1; echo "test_decode rc=$? $(( $(date +%s) - t )) s: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $R/j/test_decode.log | tr '\n' ' ')" | tee -a $R/summary.txt
grep -E "^\[  FAILED  \]|Failure" $R/j/test_decode.log | head -20
t=$(date +%s)
timeout 100 ./build/tests/test_gpu --gtest_filter='*k66_*:*k65_*' > $R/j/test_gpu.log 2>&1; echo "test_gpu k65,k66 rc=$? $(( $(date +%s) - t )) s: $(grep -E '^\[  (PASSED|FAILED) ' $R/j/test_gpu.log | tr '\n' ' ')" | tee -a $R/summary.txt
export FLASH_LADDER_LIB=$PWD/build/libflash_ladder.so
for tool in memcheck racecheck; do for d in 128 96 192 64; do
  t=$(date +%s)
  SAN_D=$d SAN_PAGES=0,64,256 timeout 90 compute-sanitizer --tool $tool --kernel-name kns=k66_ --error-exitcode 9 python3 build-carry/san.py 66 > $R/j/${tool}_$d.log 2>&1
  echo "$tool 66 d=$d rc=$? $(( $(date +%s) - t )) s: $(grep -E 'san.py|SUMMARY' $R/j/${tool}_$d.log | tr '\n' ' ')" | tee -a $R/summary.txt
done; done
tar czf $R/logs.tar.gz -C $R j && rm -rf $R/j
cat $R/summary.txt
