#!/usr/bin/env bash
# The d = 128 sweep (and d = 96 at B = 1 and 8) with rung 68 against the peers, L2 flushed by reads.
set -uo pipefail
R=$OUT; mkdir -p $R/t $R/j
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
t0=$(date +%s)
( cmake -S . -B build -G Ninja -DFL_KERNELS="68" -DFL_BUILD_BENCH=OFF -DFL_BUILD_TESTS=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && { tail -30 $R/t/build.log; exit 1; }
L=$PWD/build/libflash_ladder.so; export FLASH_LADDER_LIB=$L
PYTHONUNBUFFERED=1 timeout 340 python3 scripts/decode_bench.py --lib $L --graphs --kernels 68 --rounds 3 --repeats 30 --out $R/j/sweep_d128.json > $R/t/sweep_d128.txt 2>&1
echo "sweep d128 rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt
PYTHONUNBUFFERED=1 timeout $(( 560 - $(date +%s) + t0 )) python3 scripts/decode_bench.py --lib $L --graphs --kernels 68 --d 96 --b 1,8 --rounds 3 --repeats 30 --out $R/j/sweep_d96.json > $R/t/sweep_d96.txt 2>&1
echo "sweep d96 rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt
for f in sweep_d128 sweep_d96; do grep -A80 "GB/s" $R/t/$f.txt | tail -70 > $R/table_$f.txt; done
cd $R && tar czf runs.tar.gz t j && rm -rf t j && cd - > /dev/null
cat $R/summary.txt; cat $R/table_sweep_d128.txt | cut -c1-150
