#!/usr/bin/env bash
# Rung 72 with a block barrier after its mbarriers' set-up: racecheck, memcheck, its bit-for-bit
# test, the cache grid's bf16 cases and the long cache, and d = 192 and 96 timed again beside 71.
set -uo pipefail
R=$OUT; mkdir -p $R/j $R/t
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
t0=$(date +%s)
( cmake -S . -B build -G Ninja -DFL_KERNELS="71;72" -DFL_BUILD_BENCH=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder test_paged ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && { grep -E -B2 -A8 "error" $R/t/build.log | head -40; exit 1; }
git log --oneline -1 | cut -c1-60 >> $R/summary.txt
L=$PWD/build/libflash_ladder.so; export FLASH_LADDER_LIB=$L
for tool in racecheck memcheck; do
  timeout 50 compute-sanitizer --tool $tool --kernel-name kns=k72_ --error-exitcode 9 python3 scripts/sanitize_cache.py --kernel 72 --d 64,96,128,192 --nq 16 --pages 0,64 > $R/t/san_$tool.txt 2>&1
  echo "$tool rc=$? $(tail -2 $R/t/san_$tool.txt | tr '\n' ' ') $(( $(date +%s) - t0 )) s" >> $R/summary.txt
done
b() { n=$1; d=$2; shift 2; PYTHONUNBUFFERED=1 timeout 60 python3 scripts/decode_bench.py --lib $L --graphs --kernels 71,72 --d $d --rounds 3 --repeats 20 --out $R/j/$n.json "$@" > $R/t/$n.txt 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt; }
b q192 192 --heads 32/8 --nq 16 --b 1,8,32 --nk 8192,32768
b q96 96 --heads 32/8 --nq 16 --b 1,8,32 --nk 8192,32768
t() { n=$1; s=$2; shift 2; timeout $s "$@" > $R/t/$n.txt 2>&1; echo "$n rc=$? $(grep -E '^\[  (PASSED|FAILED)' $R/t/$n.txt | tr '\n' ' ') $(( $(date +%s) - t0 )) s" >> $R/summary.txt; }
t paged72 100 ./build/tests/test_paged --gtest_filter='PagedSame.Rung72*'
t cache 110 ./build/tests/test_paged --gtest_filter='Cache/*bf16*:PagedLong*'
python3 build-carry/summ.py $R/j/q*.json > $R/table.txt
cd $R && tar czf runs.tar.gz t j && cd - > /dev/null
cat $R/summary.txt; cat $R/table.txt
