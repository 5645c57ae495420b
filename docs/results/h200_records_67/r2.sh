#!/usr/bin/env bash
# Rung 67 against rung 66: build, tests, balanced timings at d = 96.
set -uo pipefail
R=$OUT; mkdir -p $R/j $R/t
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
t0=$(date +%s)
( cmake -S . -B build -G Ninja -DFL_KERNELS="66;67" -DFL_BUILD_BENCH=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder test_paged test_decode test_gpu ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" | tee -a $R/summary.txt; [ $rc -ne 0 ] && { grep -E -A5 "error" $R/t/build.log | head -30; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $R/summary.txt
export FLASH_LADDER_LIB=$PWD/build/libflash_ladder.so
tt() { n=$1; shift; timeout 200 "$@" > $R/t/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 )) s: $(grep -E '^\[  (PASSED|FAILED) ' $R/t/$n.log | tr '\n' ' ')" >> $R/summary.txt; }
tt test_decode build/tests/test_decode
tt test_paged build/tests/test_paged --gtest_filter='PagedSame.Rung67*:Cache/*'
tt test_gpu build/tests/test_gpu --gtest_filter='*k67_*'
L=$FLASH_LADDER_LIB
b() { n=$1; shift; PYTHONUNBUFFERED=1 timeout 200 python3 scripts/decode_bench.py --lib $L --graphs --kernels 66,67 --d 96 --rounds 5 --repeats 20 --out $R/j/$n.json "$@" > $R/t/$n.txt 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt; }
b g1 --heads 32/8 --b 1,2 --nk 4096,8192,16384,32768 --nq 1
b g2 --heads 32/8 --b 4,5,8 --nk 1024,2048,4096,8192 --nq 1
b m1 --heads 32/32 --b 1,2 --nk 1024,2048,4096,8192 --nq 1,16
python3 build-carry/summ.py $R/j/*.json > $R/table.txt
cd $R && tar czf runs.tar.gz t j && rm -rf t j && cd - > /dev/null
cat $R/summary.txt; cat $R/table.txt
