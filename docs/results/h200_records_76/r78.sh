#!/usr/bin/env bash
# Rung 76 as kept (the deal at B >= 4, one wave): its tests, the cache grid on rung 76, the
# sanitizer, the package's K/V cache tests (best on 76); the ragged one-row cells at B = 2-8 in
# two processes, equal lengths, 16 rows (not dealt now).
set -uo pipefail
R=$OUT; mkdir -p $R/j $R/t; t0=$(date +%s)
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
( cmake -S . -B build -G Ninja -DFL_KERNELS="39;75;76" -DFL_BUILD_BENCH=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder test_paged test_decode test_gpu ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && { grep -E -B2 -A8 "error" $R/t/build.log | head -40; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $R/summary.txt
T=build/tests
g() { n=$1; s=$2; shift 2; timeout $s "$@" > $R/t/$n.txt 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 )) s $(grep -E '^\[  (PASSED|FAILED)  \]|tests, listed below' $R/t/$n.txt | tr '\n' ' ')" >> $R/summary.txt; }
g rules 30 $T/test_decode --gtest_filter='DecodeRules.Rung76*'
g same 240 $T/test_paged --gtest_filter='PagedSame.Rung76*'
export FLASH_LADDER_LIB=$PWD/build/libflash_ladder.so
p() { n=$1; s=$2; shift 2; PYTHONUNBUFFERED=1 timeout $s python3 scripts/paged_bench.py --rounds 5 --out $R/j/$n.json "$@" > $R/t/$n.txt 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt; }
p pagedA 60 --kernels 75,76 --nq 1 --d 128 --ragged --pages 64 --b 2,3,4,6,8 --nk 32768
p pagedB 60 --kernels 76,75 --nq 1 --d 128 --ragged --pages 64 --b 2,3,4,6,8 --nk 32768
p fullC 45 --kernels 75,76 --nq 1 --d 128 --pages 64 --b 4,8 --nk 32768
sz() { n=$1; shift; timeout 60 compute-sanitizer --tool $n --kernel-name kns=k76_ --error-exitcode 9 python3 scripts/sanitize_cache.py --kernel 76 --d 128,96 --pages 0,64 --heads 32/8,8/8 --capacity 65536 > $R/t/san_$n.txt 2>&1; echo "san $n rc=$? $(( $(date +%s) - t0 )) s $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/t/san_$n.txt | tr '\n' ' ')" >> $R/summary.txt; }
sz memcheck
sz racecheck
el=$(( $(date +%s) - t0 )); [ $el -lt 470 ] && g grid 110 $T/test_paged --gtest_filter='*k76*:PagedLong.*'
( cd python/tests && timeout 60 python3 -m unittest test_kvcache_gpu > $R/t/kvcache.txt 2>&1; echo "kvcache rc=$? $(tail -1 $R/t/kvcache.txt)" >> $R/summary.txt )
cd $R && tar czf runs.tar.gz t j && cd - > /dev/null
cat $R/summary.txt; for n in pagedA pagedB fullC; do echo "== $n"; grep -E "^B=|Error|error" $R/t/$n.txt 2>/dev/null | head -20; done
grep -E "FAILED|Failure" $R/t/*.txt | head -20
