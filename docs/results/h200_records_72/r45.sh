#!/usr/bin/env bash
# Rung 72 as committed (TMA, L2 promotion 128 B) against rung 71: its tests, timings, the paged
# cache, the package's K/V cache tests with "best" on rung 72, memcheck and racecheck.
set -uo pipefail
R=$OUT; mkdir -p $R/j $R/t
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
t0=$(date +%s)
( cmake -S . -B build -G Ninja -DFL_KERNELS="39;71;72" -DFL_BUILD_BENCH=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder test_paged test_decode test_gpu ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && { grep -E -B2 -A8 "error" $R/t/build.log | head -40; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $R/summary.txt
L=$PWD/build/libflash_ladder.so; export FLASH_LADDER_LIB=$L
t() { n=$1; s=$2; shift 2; timeout $s "$@" > $R/t/$n.txt 2>&1; echo "$n rc=$? $(grep -E '^\[  (PASSED|FAILED)' $R/t/$n.txt | tr '\n' ' ') $(( $(date +%s) - t0 )) s" >> $R/summary.txt; }
t paged72 120 ./build/tests/test_paged --gtest_filter='PagedSame.Rung72*'
b() { n=$1; d=$2; shift 2; PYTHONUNBUFFERED=1 timeout 80 python3 scripts/decode_bench.py --lib $L --graphs --kernels 71,72 --d $d --rounds 3 --repeats 20 --out $R/j/$n.json "$@" > $R/t/$n.txt 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt; }
b q192 192 --heads 32/8 --nq 16 --b 1,8,32 --nk 8192,32768
b q96 96 --heads 32/8 --nq 16 --b 1,8,32 --nk 8192,32768
b q128 128 --heads 32/8 --nq 16 --b 1,8,32 --nk 8192,32768
b q64 64 --heads 32/8 --nq 16 --b 1,8,32 --nk 8192,32768
b q192l 192 --heads 32/8 --nq 16 --b 1 --nk 131072
PYTHONUNBUFFERED=1 timeout 70 python3 scripts/paged_bench.py --kernels 71,72 --nq 16 --d 192 --ragged --b 8 --nk 32768 --pages 64,256 --rounds 3 --out $R/j/paged192.json > $R/t/paged192.txt 2>&1
echo "paged192 rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt
t cache 120 ./build/tests/test_paged --gtest_filter='Cache/*:PagedLong*'
t gpu 30 ./build/tests/test_gpu --gtest_filter='*k72_*'
( cd python/tests && timeout 90 python3 -m unittest -v test_kvcache_gpu ) > $R/t/kvcache.txt 2>&1
echo "kvcache rc=$? $(tail -1 $R/t/kvcache.txt) $(( $(date +%s) - t0 )) s" >> $R/summary.txt
for tool in memcheck racecheck; do
  timeout 50 compute-sanitizer --tool $tool --kernel-name kns=k72_ --error-exitcode 9 python3 scripts/sanitize_cache.py --kernel 72 --d 64,96,128,192 --nq 16 --pages 0,64 > $R/t/san_$tool.txt 2>&1
  echo "$tool rc=$? $(tail -2 $R/t/san_$tool.txt | tr '\n' ' ') $(( $(date +%s) - t0 )) s" >> $R/summary.txt
done
t decode 70 ./build/tests/test_decode
python3 build-carry/summ.py $R/j/q*.json > $R/table.txt
cd $R && tar czf runs.tar.gz t j && cd - > /dev/null
cat $R/summary.txt; cat $R/table.txt; grep -E "GB/s|shuffled|contig|^ *[0-9]" $R/t/paged192.txt | tail -12; grep -E "FAIL|ERROR" $R/t/kvcache.txt $R/t/paged72.txt | head
