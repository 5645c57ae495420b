#!/usr/bin/env bash
# Trial: 64-row blocks at d = 128 split for two blocks an SM (rung 68 copied, the split rule and launch edited), against rung 68.
set -uo pipefail
R=$OUT; mkdir -p $R/t $R/j
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
t0=$(date +%s)
( cmake -S . -B build -G Ninja -DFL_KERNELS="68;69" -DFL_BUILD_BENCH=OFF -DFL_BUILD_TESTS=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && { grep -E "error" $R/t/build.log | head; tail -5 $R/t/build.log; exit 1; }
L=$PWD/build/libflash_ladder.so; export FLASH_LADDER_LIB=$L
PYTHONUNBUFFERED=1 timeout 200 python3 scripts/decode_bench.py --lib $L --graphs --kernels 68,69 --d 128 --heads 32/8 --b 1,4,8,16 --nk 8192,32768,131072 --nq 16 --rounds 3 --repeats 20 --out $R/j/rows2.json > $R/t/rows2.txt 2>&1
echo "bench rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt
grep -A30 "GB/s of K" $R/t/rows2.txt > $R/table.txt
cd $R && tar czf runs.tar.gz t j && rm -rf t j && cd - > /dev/null
cat $R/summary.txt $R/table.txt
