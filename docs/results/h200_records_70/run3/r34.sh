#!/usr/bin/env bash
# Rung 70 with S from shared memory (SS): tests, one bench process, sanitizers.
set -uo pipefail
R=$OUT; mkdir -p $R/t $R/j
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
t0=$(date +%s)
( cmake -S . -B build -G Ninja -DFL_KERNELS="69;70" -DFL_BUILD_BENCH=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder test_decode test_paged test_gpu ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && { grep -E "error" $R/t/build.log | head -20; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $R/summary.txt
s() { echo "$1 rc=$2 $(( $(date +%s) - t0 )) s: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) |ERROR SUMMARY|RACECHECK SUMMARY|calls' $R/t/$1.txt | tr '\n' ' ' | cut -c1-300)" >> $R/summary.txt; }
timeout 60 ./build/tests/test_gpu --gtest_filter='*k70_*' > $R/t/gpu.txt 2>&1; s gpu $?
timeout 100 ./build/tests/test_paged --gtest_filter='PagedSame.Rung70*' > $R/t/paged70.txt 2>&1; s paged70 $?
L=$PWD/build/libflash_ladder.so; export FLASH_LADDER_LIB=$L
B="python3 scripts/decode_bench.py --lib $L --graphs --kernels 69,70 --heads 32/8 --nq 16 --rounds 5 --repeats 30"
timeout 100 $B --d 128 --b 1,4,8,12,16 --nk 8192,32768 --out $R/j/a1.json > $R/t/bench_a1.txt 2>&1; echo "a1 rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt
timeout 50 $B --d 128 --b 20,24,32,48,64 --nk 8192 --out $R/j/a2.json > $R/t/bench_a2.txt 2>&1; echo "a2 rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt
timeout 50 $B --d 64 --b 4,16,48 --nk 8192,32768 --out $R/j/a3.json > $R/t/bench_a3.txt 2>&1; echo "a3 rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt
timeout 110 ./build/tests/test_paged --gtest_filter='Cache/*:PagedLong*' > $R/t/paged.txt 2>&1; s paged $?
timeout 60 ./build/tests/test_decode > $R/t/decode.txt 2>&1; s decode $?
timeout 45 compute-sanitizer --tool memcheck --kernel-name kns=k70_ --error-exitcode 9 python3 scripts/sanitize_cache.py --kernel 70 --d 64,128 --heads 32/8 --nq 16 --pages 0,16 --capacity 4096 > $R/t/mem.txt 2>&1; s mem $?
timeout 60 compute-sanitizer --tool racecheck --kernel-name kns=k70_ --error-exitcode 9 python3 scripts/sanitize_cache.py --kernel 70 --d 64,128 --heads 32/8 --nq 16 --pages 0,16 --capacity 2048 > $R/t/race.txt 2>&1; s race $?
python3 build-carry/summ.py $R/j/a*.json > $R/table.txt
cd $R && tar czf runs.tar.gz t j && cd - > /dev/null
cat $R/summary.txt; grep -h -E "FAILED  \]|FAIL \(|Which is|max error" $R/t/gpu.txt $R/t/paged*.txt $R/t/decode.txt | cut -c1-220 | head -24; cat $R/table.txt
