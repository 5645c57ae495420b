#!/usr/bin/env bash
# Which part of the read flush slows rung 67: four flushes (zeros, reads, zeros then reads, reads then zeros), events only.
set -uo pipefail
R=$OUT; mkdir -p $R/t
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
t0=$(date +%s)
( cmake -S . -B build -G Ninja -DFL_KERNELS="67;68" -DFL_BUILD_BENCH=OFF -DFL_BUILD_TESTS=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && { tail -30 $R/t/build.log; exit 1; }
export FLASH_LADDER_LIB=$PWD/build/libflash_ladder.so
FOUR=1 NOPROF=1 PYTHONUNBUFFERED=1 timeout 200 python3 build-carry/trace69.py 67,68 96:1:1:1024:32:8,96:1:1:8192:32:8,192:8:1:8192:32:8,96:8:16:8192:32:8,128:1:1:8192:32:8 7 30 $R > $R/t/trace.txt 2>&1
echo "trace rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt
cp $R/t/trace.txt $R/trace4.txt; mv $R/trace.json $R/trace4.json
cd $R && tar czf runs.tar.gz t && rm -rf t && cd - > /dev/null
cat $R/summary.txt; grep -v "^  \|Warning" $R/trace4.txt | cut -c1-75
