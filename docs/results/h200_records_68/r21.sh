#!/usr/bin/env bash
set -uo pipefail
R=$OUT; mkdir -p $R/t
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
t0=$(date +%s)
( cmake -S . -B build -G Ninja -DFL_KERNELS="67;68" -DFL_BUILD_BENCH=OFF -DFL_BUILD_TESTS=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && { tail -30 $R/t/build.log; exit 1; }
export FLASH_LADDER_LIB=$PWD/build/libflash_ladder.so
timeout 120 python3 build-carry/clock.py $R/t/phases.txt $R/t/smi.csv > $R/t/clock.txt 2>&1
echo "clock rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt
python3 build-carry/clock_summ.py $R/t/phases.txt $R/t/smi.csv > $R/clock_table.txt 2>&1
cd $R && tar czf runs.tar.gz t && rm -rf t && cd - > /dev/null
cat $R/summary.txt $R/clock_table.txt
