#!/usr/bin/env bash
# Rung 75: compute-sanitizer on its changed launches (capacity 65536: split launches alone), the
# cache grid, PagedLong, its decode grid and kernel cases, the package's K/V cache tests (best on
# 75), and the contiguous calls of its changed instances again, rung 75 first.
set -uo pipefail
R=$OUT; mkdir -p $R/j $R/t; t0=$(date +%s)
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
( cmake -S . -B build -G Ninja -DFL_KERNELS="39;74;75" -DFL_BUILD_BENCH=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder test_paged test_decode test_gpu ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && { grep -E -B2 -A8 "error" $R/t/build.log | head -40; exit 1; }
export FLASH_LADDER_LIB=$PWD/build/libflash_ladder.so
s() { n=$1; shift; timeout 150 compute-sanitizer --tool $n --kernel-name kns=k75_ --error-exitcode 9 python3 scripts/sanitize_cache.py --kernel 75 --d 128,192 --pages 0,64 --heads 32/8 --capacity 65536 > $R/t/san_$n.txt 2>&1; echo "san $n rc=$? $(( $(date +%s) - t0 )) s $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/t/san_$n.txt | tr '\n' ' ')" >> $R/summary.txt; }
s memcheck
s racecheck
T=build/tests
g() { n=$1; shift; timeout 200 "$@" > $R/t/$n.txt 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 )) s $(grep -E '^\[  (PASSED|FAILED)  \]|tests, listed below' $R/t/$n.txt | tr '\n' ' ')" >> $R/summary.txt; }
g grid $T/test_paged --gtest_filter='*k75*:PagedLong.*'
g dgrid $T/test_decode --gtest_filter='*k75*'
g kcases $T/test_gpu --gtest_filter='*k75_*'
( cd python/tests && timeout 150 python3 -m unittest test_kvcache_gpu > $R/t/kvcache.txt 2>&1; echo "kvcache rc=$? $(tail -1 $R/t/kvcache.txt)" >> $R/summary.txt )
b() { n=$1; s=$2; shift 2; PYTHONUNBUFFERED=1 timeout $s python3 scripts/decode_bench.py --graphs --rounds 5 --repeats 20 --out $R/j/$n.json "$@" > $R/t/$n.txt 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt; }
el=$(( $(date +%s) - t0 )); [ $el -lt 430 ] && b contig 80 --kernels 75,74 --heads 32/8 --nq 1 --b 1,4 --nk 8192,32768,131072
el=$(( $(date +%s) - t0 )); [ $el -lt 500 ] && b contig192 60 --kernels 75,74 --d 192 --heads 32/8 --nq 1 --b 1,16 --nk 4096,32768
cd $R && tar czf runs.tar.gz t j && cd - > /dev/null
cat $R/summary.txt; for n in contig contig192; do echo "== $n"; grep -A12 "^GB/s of K" $R/t/$n.txt 2>/dev/null; done
grep -E "FAILED|Failure" $R/t/*.txt | head -20
