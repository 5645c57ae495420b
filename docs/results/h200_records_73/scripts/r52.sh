#!/usr/bin/env bash
# Rung 73: memcheck and racecheck on its moved calls (B = 20 and 24, one split past the SMs), and
# the paged cache at those batches beside rung 72.
set -uo pipefail
R=$OUT; mkdir -p $R/t $R/j
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
t0=$(date +%s)
( cmake -S . -B build -G Ninja -DFL_KERNELS="72;73" -DFL_BUILD_BENCH=OFF -DFL_BUILD_TESTS=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && { grep -E -B2 -A8 "error" $R/t/build.log | head -40; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $R/summary.txt
L=$PWD/build/libflash_ladder.so; export FLASH_LADDER_LIB=$L
for tool in memcheck racecheck; do
  timeout 150 compute-sanitizer --tool $tool --kernel-name kns=k73_ --error-exitcode 9 python3 build-carry/sanitize73.py > $R/t/san73_$tool.txt 2>&1
  echo "$tool rc=$? $(tail -2 $R/t/san73_$tool.txt | tr '\n' ' ') $(( $(date +%s) - t0 )) s" >> $R/summary.txt
done
PYTHONUNBUFFERED=1 timeout 200 python3 scripts/paged_bench.py --kernels 72,73 --nq 16 --d 128 --ragged --b 20,24 --nk 32768 --pages 64,256 --rounds 3 --out $R/j/paged73.json > $R/t/paged73.txt 2>&1
echo "paged rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt
cd $R && tar czf runs.tar.gz t j && cd - > /dev/null
cat $R/summary.txt; cat $R/t/san73_memcheck.txt | head -8; grep -v "^ *$" $R/t/paged73.txt | tail -6
