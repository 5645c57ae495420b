#!/usr/bin/env bash
# The committed flush record (scripts/flush_trace.py, four flushes, CUPTI), and the d = 128 sweep with --flush zeros beside run 3's reads.
set -uo pipefail
R=$OUT; mkdir -p $R/t $R/j
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
t0=$(date +%s)
( cmake -S . -B build -G Ninja -DFL_KERNELS="67;68" -DFL_BUILD_BENCH=OFF -DFL_BUILD_TESTS=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && { tail -30 $R/t/build.log; exit 1; }
L=$PWD/build/libflash_ladder.so; export FLASH_LADDER_LIB=$L
PYTHONUNBUFFERED=1 timeout 260 python3 scripts/flush_trace.py --lib $L --kernels 67,68,cudnn --shapes 96:1:1:1024:32:8,96:1:1:8192:32:8,192:8:1:8192:32:8,96:8:16:8192:32:8,128:1:1:8192:32:8 --flushes zeros,reads,zeros+reads,reads+zeros --rounds 5 --repeats 30 --profile --out $R/j/flush_trace.json > $R/t/flush_trace.txt 2>&1
echo "flush_trace rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt
PYTHONUNBUFFERED=1 timeout $(( 570 - $(date +%s) + t0 )) python3 scripts/decode_bench.py --lib $L --graphs --flush zeros --kernels 68 --rounds 3 --repeats 30 --out $R/j/sweep_d128_zeros.json > $R/t/sweep_d128_zeros.txt 2>&1
echo "sweep d128 zeros rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt
cp $R/t/flush_trace.txt $R/flush_trace.txt
cd $R && tar czf runs.tar.gz t j && rm -rf t j && cd - > /dev/null
cat $R/summary.txt; grep -v "^  " $R/flush_trace.txt | cut -c1-70 | head -130
