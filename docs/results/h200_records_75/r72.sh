#!/usr/bin/env bash
# Rung 75 beside rung 74: its tests (the wrapper, the launch-size rule, bit for bit with 74), the
# paged one-row cells B = 1, 2, 4, 8 (two processes), B = 1 and 4 with 8192 / 131072 keys and
# d = 192, and the contiguous calls of the changed instances.
set -uo pipefail
R=$OUT; mkdir -p $R/j $R/t; t0=$(date +%s)
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
( cmake -S . -B build -G Ninja -DFL_KERNELS="74;75" -DFL_BUILD_BENCH=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder test_paged test_decode test_ptx ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && { grep -E -B2 -A8 "error" $R/t/build.log | head -40; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $R/summary.txt
T=build/tests
g() { n=$1; shift; timeout 200 "$@" > $R/t/$n.txt 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 )) s $(grep -E '^\[  (PASSED|FAILED)  \]' $R/t/$n.txt | tr '\n' ' ')" >> $R/summary.txt; }
g ptx $T/test_ptx --gtest_filter='DynamicSmem.*'
g rules $T/test_decode --gtest_filter='DecodeRules.Rung75*'
g same $T/test_paged --gtest_filter='PagedSame.Rung75*'
export FLASH_LADDER_LIB=$PWD/build/libflash_ladder.so
p() { n=$1; s=$2; shift 2; PYTHONUNBUFFERED=1 timeout $s python3 scripts/paged_bench.py --nq 1 --ragged --pages 64,256 --rounds 5 --out $R/j/$n.json "$@" > $R/t/$n.txt 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt; }
p pagedA 120 --kernels 74,75 --d 128 --b 1,2,4,8 --nk 32768 --in-order
p pagedB 120 --kernels 75,74 --d 128 --b 1,2,4,8 --nk 32768 --in-order
p pagedC 100 --kernels 74,75 --d 128 --b 1,4 --nk 8192,131072
p pagedD 60 --kernels 74,75 --d 192 --b 1,4 --nk 32768
b() { n=$1; s=$2; shift 2; PYTHONUNBUFFERED=1 timeout $s python3 scripts/decode_bench.py --graphs --rounds 3 --repeats 20 --out $R/j/$n.json "$@" > $R/t/$n.txt 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt; }
el=$(( $(date +%s) - t0 )); [ $el -lt 450 ] && b contig 90 --kernels 74,75 --heads 32/8 --nq 1 --b 1,4 --nk 8192,32768,131072
el=$(( $(date +%s) - t0 )); [ $el -lt 500 ] && b contig192 60 --kernels 74,75 --d 192 --heads 32/8 --nq 1 --b 1,16 --nk 4096,32768
cd $R && tar czf runs.tar.gz t j && cd - > /dev/null
cat $R/summary.txt; for n in pagedA pagedB pagedC pagedD; do echo "== $n"; grep -E "^B=" $R/t/$n.txt 2>/dev/null; done
for n in contig contig192; do echo "== $n"; grep -v "^#" $R/t/$n.txt 2>/dev/null | tail -14; done
