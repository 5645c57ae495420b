#!/usr/bin/env bash
# Rung 69 against rung 68: 64-row GQA calls at d = 128 (counts moved and not), one-row controls; two processes, nine rounds.
set -uo pipefail
R=$OUT; mkdir -p $R/t $R/j
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
t0=$(date +%s)
( cmake -S . -B build -G Ninja -DFL_KERNELS="68;69" -DFL_BUILD_BENCH=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder test_paged ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && { grep -E "error" $R/t/build.log | head; exit 1; }
L=$PWD/build/libflash_ladder.so; export FLASH_LADDER_LIB=$L
B="python3 scripts/decode_bench.py --lib $L --graphs --kernels 68,69 --d 128 --heads 32/8 --rounds 9 --repeats 30"
for proc in a b; do
  ( $B --nq 16 --b 1,2 --nk 8192,16384,32768 --out $R/j/${proc}1.json
    $B --nq 16 --b 1,8 --nk 131072 --out $R/j/${proc}2.json
    $B --nq 16 --b 4,8,16 --nk 4096,8192,32768 --out $R/j/${proc}3.json
    $B --nq 16 --b 20,24,48 --nk 8192,32768 --out $R/j/${proc}4.json
    $B --nq 16 --b 64 --nk 8192 --out $R/j/${proc}5.json
    $B --nq 1 --b 1,8 --nk 32768 --out $R/j/${proc}6.json ) > $R/t/bench_$proc.txt 2>&1
  echo "bench $proc rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt
done
timeout 60 ./build/tests/test_paged --gtest_filter='Cache/Paged.PassesTheCacheGrid/bf16_d192' > $R/t/test_paged.txt 2>&1
echo "test_paged rc=$? $(( $(date +%s) - t0 )) s: $(grep -E '^\[  (PASSED|FAILED) ' $R/t/test_paged.txt | tr '\n' ' ')" >> $R/summary.txt
python3 build-carry/summ.py $R/j/a*.json $R/j/b*.json > $R/table.txt
cd $R && tar czf runs.tar.gz t j && cd - > /dev/null
cat $R/summary.txt $R/table.txt
