#!/usr/bin/env bash
set -uo pipefail
R=$OUT; mkdir -p $R
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
t0=$(date +%s)
( cmake -S . -B build -G Ninja -DFL_KERNELS="66;67" -DFL_BUILD_BENCH=OFF -DFL_BUILD_TESTS=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder ) > $R/build.log 2>&1
echo "build rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt
FLASH_LADDER_LIB=$PWD/build/libflash_ladder.so timeout 120 python3 build-carry/ws67.py > $R/ws.txt 2>&1; echo "ws rc=$?" >> $R/summary.txt
cat $R/summary.txt $R/ws.txt
