#!/usr/bin/env bash
# Rung 69 with the count taken only where it splits: its tests, and the calls whose count moves that run 2 did not time.
set -uo pipefail
R=$OUT; mkdir -p $R/t $R/j
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
t0=$(date +%s)
( cmake -S . -B build -G Ninja -DFL_KERNELS="68;69" -DFL_BUILD_BENCH=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder test_decode test_paged ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && { grep -E "error" $R/t/build.log | head -20; exit 1; }
timeout 100 ./build/tests/test_decode --gtest_filter='DecodeRules.*:DecodeSplits.*' > $R/t/test_decode.txt 2>&1
echo "test_decode rc=$? $(( $(date +%s) - t0 )) s: $(grep -E '^\[  (PASSED|FAILED) ' $R/t/test_decode.txt | tr '\n' ' ')" >> $R/summary.txt
timeout 100 ./build/tests/test_paged --gtest_filter='PagedSame.Rung69*' > $R/t/test_paged.txt 2>&1
echo "test_paged rc=$? $(( $(date +%s) - t0 )) s: $(grep -E '^\[  (PASSED|FAILED) ' $R/t/test_paged.txt | tr '\n' ' ')" >> $R/summary.txt
L=$PWD/build/libflash_ladder.so; export FLASH_LADDER_LIB=$L
B="python3 scripts/decode_bench.py --lib $L --graphs --kernels 68,69 --d 128 --heads 32/8 --rounds 9 --repeats 30 --nq 16"
for proc in a b; do
  ( $B --b 12,18,40,48 --nk 8192,32768 --out $R/j/${proc}7.json
    $B --b 20,24 --nk 8192 --out $R/j/${proc}8.json
    $B --b 4,8 --nk 8192 --out $R/j/${proc}9.json ) > $R/t/bench_$proc.txt 2>&1
  echo "bench $proc rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt
done
python3 build-carry/summ.py $R/j/a*.json $R/j/b*.json > $R/table.txt
cd $R && tar czf runs.tar.gz t j && rm -rf t j && cd - > /dev/null
cat $R/summary.txt $R/table.txt; tar xzf $R/runs.tar.gz -O t/test_decode.txt t/test_paged.txt 2>/dev/null | grep -E "Failure|Expected|Which|FAILED" | head -20
