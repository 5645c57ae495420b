#!/usr/bin/env bash
# Rung 76's rule as kept (chunks of 4 MiB or more): its rule and test again.
set -uo pipefail
R=$OUT; mkdir -p $R/t; t0=$(date +%s)
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
( cmake -S . -B build -G Ninja -DFL_KERNELS="75;76" -DFL_BUILD_BENCH=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target test_paged test_decode ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && { grep -E -B2 -A8 "error" $R/t/build.log | head -40; exit 1; }
T=build/tests
g() { n=$1; s=$2; shift 2; timeout $s "$@" > $R/t/$n.txt 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 )) s $(grep -E '^\[  (PASSED|FAILED)  \]|tests, listed below' $R/t/$n.txt | tr '\n' ' ')" >> $R/summary.txt; }
g rules 20 $T/test_decode --gtest_filter='DecodeRules.Rung76*'
g same 170 $T/test_paged --gtest_filter='PagedSame.Rung76*'
cat $R/summary.txt; grep -E "FAILED|Failure" -A4 $R/t/*.txt | head -30
