#!/usr/bin/env bash
# Rung 72 (TMA copies of the wgmma blocks' tiles) against rung 71: tests, timings, sanitizer.
set -uo pipefail
R=$OUT; mkdir -p $R/j $R/t
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
t0=$(date +%s)
( cmake -S . -B build -G Ninja -DFL_KERNELS="71;72" -DFL_BUILD_BENCH=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder test_paged test_decode test_gpu ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && { grep -E -B2 -A8 "error" $R/t/build.log | head -40; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $R/summary.txt
git log --oneline -1 >> $R/summary.txt
L=$PWD/build/libflash_ladder.so; export FLASH_LADDER_LIB=$L
t() { n=$1; shift; timeout 150 "$@" > $R/t/$n.txt 2>&1; echo "$n rc=$? $(grep -E '^\[  (PASSED|FAILED)' $R/t/$n.txt | tr '\n' ' ') $(( $(date +%s) - t0 )) s" >> $R/summary.txt; }
t paged72 ./build/tests/test_paged --gtest_filter='PagedSame.Rung72*'
b() { n=$1; d=$2; shift 2; PYTHONUNBUFFERED=1 timeout 110 python3 scripts/decode_bench.py --lib $L --graphs --kernels 71,72 --d $d --rounds 3 --repeats 20 --out $R/j/$n.json "$@" > $R/t/$n.txt 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt; }
b q192 192 --heads 32/8 --nq 16 --b 1,8,32 --nk 8192,32768
b q96 96 --heads 32/8 --nq 16 --b 1,8,32 --nk 8192,32768
b q128 128 --heads 32/8 --nq 16 --b 1,8,32 --nk 8192,32768
t cache ./build/tests/test_paged --gtest_filter='Cache/*:PagedLong*'
t gpu ./build/tests/test_gpu --gtest_filter='*k72_*'
timeout 100 compute-sanitizer --tool memcheck --kernel-name kns=k72_ --error-exitcode 9 python3 scripts/sanitize_cache.py --kernel 72 --d 96,192 --nq 16 --pages 0,64 > $R/t/san_memcheck.txt 2>&1
echo "memcheck rc=$? $(tail -2 $R/t/san_memcheck.txt | tr '\n' ' ') $(( $(date +%s) - t0 )) s" >> $R/summary.txt
b q64 64 --heads 32/8 --nq 16 --b 1,8,32 --nk 8192,32768
python3 build-carry/summ.py $R/j/*.json > $R/table.txt
cd $R && tar czf runs.tar.gz t j && cd - > /dev/null
cat $R/summary.txt; cat $R/table.txt; grep -E "FAILED|Failure|rror" $R/t/paged72.txt | head -20
