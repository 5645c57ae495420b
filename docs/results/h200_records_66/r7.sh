#!/usr/bin/env bash
# Trial 67 (d = 96 key-warps tiles counted big: ring 3, one slot an SM, launch alone) against rung 66, d = 96.
set -uo pipefail
R=$OUT; mkdir -p $R
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
cp -r build-carry/tried/67_decode_big_d96 kernels/
t0=$(date +%s)
( cmake -S . -B build -G Ninja -DFL_KERNELS="66;67" -DFL_BUILD_BENCH=OFF -DFL_BUILD_TESTS=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder ) > $R/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" | tee -a $R/summary.txt; [ $rc -ne 0 ] && { grep -E -A5 "error" $R/build.log | head -30; exit 1; }
L=$PWD/build/libflash_ladder.so
b() { n=$1; shift; PYTHONUNBUFFERED=1 timeout 80 python3 scripts/decode_bench.py --lib $L --graphs --kernels 66,67 --d 96 --rounds 3 --repeats 20 --out $R/$n.json "$@" > $R/$n.txt 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 )) s" | tee -a $R/summary.txt; grep -A20 "^GB/s of K" $R/$n.txt | grep -E "^(shape|H=)"; }
t0=$(date +%s)
b g1 --heads 32/8 --b 1,8 --nk 1024,8192,32768,131072 --nq 1
b m1 --heads 32/32 --b 1 --nk 8192,32768,131072 --nq 1,16
b g16 --heads 32/8 --b 8 --nk 32768 --nq 16
cat $R/summary.txt
