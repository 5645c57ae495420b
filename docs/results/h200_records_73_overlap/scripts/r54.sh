#!/usr/bin/env bash
# Rung 74 (the softmax under the last P V) against rung 73: its bit-for-bit test, timings at
# d = 128 (16 query rows, B = 1-32), d = 96 and 192, one query row, sanitizers, test_gpu, test_decode.
set -uo pipefail
R=$OUT; mkdir -p $R/j $R/t
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
t0=$(date +%s)
( cmake -S . -B build -G Ninja -DFL_KERNELS="73;74" -DFL_BUILD_BENCH=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder test_paged test_decode test_gpu ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && { grep -E -B2 -A8 "error" $R/t/build.log | head -40; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $R/summary.txt
L=$PWD/build/libflash_ladder.so; export FLASH_LADDER_LIB=$L
t() { n=$1; s=$2; shift 2; timeout $s "$@" > $R/t/$n.txt 2>&1; echo "$n rc=$? $(grep -E '^\[  (PASSED|FAILED)' $R/t/$n.txt | tr '\n' ' ') $(( $(date +%s) - t0 )) s" >> $R/summary.txt; }
b() { n=$1; s=$2; shift 2; PYTHONUNBUFFERED=1 timeout $s python3 scripts/decode_bench.py --lib $L --graphs --kernels 73,74 --rounds 3 --repeats 20 --out $R/j/$n.json "$@" > $R/t/$n.txt 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt; }
t paged74 150 ./build/tests/test_paged --gtest_filter='PagedSame.Rung74*'
b q16 200 --d 128 --heads 32/8 --nq 16 --b 1,8,20,24,32 --nk 8192,32768
t gpu 60 ./build/tests/test_gpu --gtest_filter='*k74_*'
for tool in memcheck racecheck; do
  timeout 60 compute-sanitizer --tool $tool --kernel-name kns=k74_ --error-exitcode 9 python3 build-carry/sanitize74.py > $R/t/san74_$tool.txt 2>&1
  echo "$tool rc=$? $(tail -2 $R/t/san74_$tool.txt | tr '\n' ' ') $(( $(date +%s) - t0 )) s" >> $R/summary.txt
done
b d192 60 --d 192 --heads 32/8 --nq 16 --b 1,8 --nk 32768
b d96 50 --d 96 --heads 32/8 --nq 16 --b 8 --nk 32768
b nq1 50 --d 128 --heads 32/8,32/32 --nq 1 --b 8 --nk 32768
t decode 90 ./build/tests/test_decode
python3 build-carry/summ.py $R/j/*.json > $R/table.txt
cd $R && tar czf runs.tar.gz t j && cd - > /dev/null
cat $R/summary.txt; cat $R/table.txt; grep -E "FAIL|DIFFERS|Failure" $R/t/paged74.txt $R/t/san74_memcheck.txt | head
