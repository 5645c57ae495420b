#!/usr/bin/env bash
# Rung 76 beside rung 75: its rule and its test against the reference, the ragged one-row cells
# B = 1, 2, 4, 8 (two processes, both orders), every sequence at the capacity (B = 4, 8), 16 query
# rows at B = 20 and 24, and calls without lengths (not dealt: the register change alone).
set -uo pipefail
R=$OUT; mkdir -p $R/j $R/t; t0=$(date +%s)
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
( cmake -S . -B build -G Ninja -DFL_KERNELS="39;75;76" -DFL_BUILD_BENCH=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder test_paged test_decode test_gpu ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && { grep -E -B2 -A8 "error" $R/t/build.log | head -40; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $R/summary.txt
T=build/tests
g() { n=$1; s=$2; shift 2; timeout $s "$@" > $R/t/$n.txt 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 )) s $(grep -E '^\[  (PASSED|FAILED)  \]|tests, listed below' $R/t/$n.txt | tr '\n' ' ')" >> $R/summary.txt; }
g rules 30 $T/test_decode --gtest_filter='DecodeRules.Rung76*'
g same 150 $T/test_paged --gtest_filter='PagedSame.Rung76*'
export FLASH_LADDER_LIB=$PWD/build/libflash_ladder.so
p() { n=$1; s=$2; shift 2; PYTHONUNBUFFERED=1 timeout $s python3 scripts/paged_bench.py --rounds 5 --out $R/j/$n.json "$@" > $R/t/$n.txt 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt; }
p pagedA 110 --kernels 75,76 --nq 1 --d 128 --ragged --pages 64 --b 1,2,4,8 --nk 32768
p pagedB 110 --kernels 76,75 --nq 1 --d 128 --ragged --pages 64 --b 1,2,4,8 --nk 32768
p fullC 60 --kernels 75,76 --nq 1 --d 128 --pages 64 --b 4,8 --nk 32768
p rowsD 70 --kernels 75,76 --nq 16 --d 128 --ragged --pages 64 --b 20,24 --nk 32768
b() { n=$1; s=$2; shift 2; PYTHONUNBUFFERED=1 timeout $s python3 scripts/decode_bench.py --graphs --rounds 3 --repeats 20 --out $R/j/$n.json "$@" > $R/t/$n.txt 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt; }
el=$(( $(date +%s) - t0 )); [ $el -lt 500 ] && b plain 80 --kernels 75,76 --heads 32/8 --nq 1,16 --b 1,8 --nk 8192,32768
cd $R && tar czf runs.tar.gz t j && cd - > /dev/null
cat $R/summary.txt; for n in pagedA pagedB fullC rowsD; do echo "== $n"; grep -E "^B=|Error|error" $R/t/$n.txt 2>/dev/null | head -20; done
echo "== plain"; grep -v "^#" $R/t/plain.txt 2>/dev/null | tail -12
grep -E "FAILED|Failure" $R/t/*.txt | head -20
