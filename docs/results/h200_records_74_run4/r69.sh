#!/usr/bin/env bash
# Rung 74 beside rung 73 on more paged one-row cells: d = 96 and 192 (B = 8, 32768 keys), and
# d = 128 at B = 8 with 8192 and 131072 keys.
set -uo pipefail
R=$OUT; mkdir -p $R/j $R/t; t0=$(date +%s)
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
( cmake -S . -B build -G Ninja -DFL_KERNELS="73;74" -DFL_BUILD_BENCH=OFF -DFL_BUILD_TESTS=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && { tail -20 $R/t/build.log; exit 1; }
export FLASH_LADDER_LIB=$PWD/build/libflash_ladder.so
p() { n=$1; shift; PYTHONUNBUFFERED=1 timeout 75 python3 scripts/paged_bench.py --kernels 73,74 --nq 1 --ragged --pages 64,256 --in-order --rounds 5 --out $R/j/$n.json "$@" > $R/t/$n.txt 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt; }
p d96 --d 96 --b 8 --nk 32768
p d192 --d 192 --b 8 --nk 32768
p d128 --d 128 --b 8 --nk 8192,131072
cat $R/summary.txt; for n in d96 d192 d128; do grep -E "^B=" $R/t/$n.txt; done
