#!/usr/bin/env bash
# Where the paged one-row cell at B = 4 (32768 keys, pages of 64) loses: pages in order, pages
# shuffled within 2 MiB and 2 MiB spans shuffled, ragged lengths against full ones (rung 74).
set -uo pipefail
R=$OUT; mkdir -p $R/j $R/t; t0=$(date +%s)
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
( cmake -S . -B build -G Ninja -DFL_KERNELS="73;74" -DFL_BUILD_BENCH=OFF -DFL_BUILD_TESTS=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && { tail -20 $R/t/build.log; exit 1; }
export FLASH_LADDER_LIB=$PWD/build/libflash_ladder.so
p() { n=$1; s=$2; shift 2; PYTHONUNBUFFERED=1 timeout $s python3 scripts/paged_bench.py --nq 1 --d 128 --pages 64 --rounds 5 --out $R/j/$n.json "$@" > $R/t/$n.txt 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt; }
p spans1 150 --kernels 74 --b 4,8 --nk 32768 --ragged --in-order --spans
p full 100 --kernels 73,74 --b 4,8 --nk 32768 --in-order
p spans2 150 --kernels 74 --b 4,8 --nk 32768 --ragged --in-order --spans
cd $R && tar czf runs.tar.gz t j && cd - > /dev/null
cat $R/summary.txt; for n in spans1 full spans2; do echo "== $n"; grep -E "^B=" $R/t/$n.txt 2>/dev/null; done
