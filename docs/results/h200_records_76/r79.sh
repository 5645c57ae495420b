#!/usr/bin/env bash
# Rung 76: the cache and decode grids (best on 76), and the ragged cells beside rung 75 at 8192
# and 131072 keys, d = 192, and 16 query rows at B = 4 and 8.
set -uo pipefail
R=$OUT; mkdir -p $R/j $R/t; t0=$(date +%s)
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
( cmake -S . -B build -G Ninja -DFL_KERNELS="39;75;76" -DFL_BUILD_BENCH=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder test_paged test_decode ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && { grep -E -B2 -A8 "error" $R/t/build.log | head -40; exit 1; }
export FLASH_LADDER_LIB=$PWD/build/libflash_ladder.so
p() { n=$1; s=$2; shift 2; PYTHONUNBUFFERED=1 timeout $s python3 scripts/paged_bench.py --rounds 5 --out $R/j/$n.json "$@" > $R/t/$n.txt 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt; }
p longE 90 --kernels 75,76 --nq 1 --d 128 --ragged --pages 64,256 --b 4,8 --nk 8192,131072
p d192F 45 --kernels 75,76 --nq 1 --d 192 --ragged --pages 64 --b 4,8 --nk 32768
p rowsG 45 --kernels 75,76 --nq 16 --d 128 --ragged --pages 64 --b 4,8 --nk 32768
( timeout 200 ctest --test-dir build -R "Cache/Paged|Grid/Decode|PagedLong" > $R/t/ctest.txt 2>&1; echo "ctest rc=$? $(( $(date +%s) - t0 )) s $(grep -E 'tests passed|tests failed' $R/t/ctest.txt)" >> $R/summary.txt )
cd $R && tar czf runs.tar.gz t j && cd - > /dev/null
cat $R/summary.txt; for n in longE d192F rowsG; do echo "== $n"; grep -E "^B=|Error|error" $R/t/$n.txt 2>/dev/null | head -20; done
grep -E "FAILED|Failure|Failed" $R/t/*.txt | head -20
