#!/usr/bin/env bash
# Rung 74 through the package: the K/V cache tests (best on rung 74), a build of 39, 73 and 74.
set -uo pipefail
R=$OUT; mkdir -p $R/t; t0=$(date +%s)
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
( cmake -S . -B build -G Ninja -DFL_KERNELS="39;73;74" -DFL_BUILD_BENCH=OFF -DFL_BUILD_TESTS=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && { tail -20 $R/t/build.log; exit 1; }
export FLASH_LADDER_LIB=$PWD/build/libflash_ladder.so
cd python/tests && timeout 300 python3 -m unittest -v test_kvcache_gpu > $R/t/kvcache.txt 2>&1; echo "kvcache rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt; cd ../..
tail -5 $R/t/kvcache.txt; grep -cE "ok$" $R/t/kvcache.txt; cat $R/summary.txt
