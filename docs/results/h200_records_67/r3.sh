#!/usr/bin/env bash
# compute-sanitizer over the cache calls: rung 67 at d = 96 (capacity 1024 and 8192), rung 66 at every head dim.
set -uo pipefail
R=$OUT; mkdir -p $R/t
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
t0=$(date +%s)
( cmake -S . -B build -G Ninja -DFL_KERNELS="66;67" -DFL_BUILD_BENCH=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder ) > $R/t/build.log 2>&1
echo "build rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt
export FLASH_LADDER_LIB=$PWD/build/libflash_ladder.so
s() { n=$1; tool=$2; k=$3; shift 3; timeout 250 compute-sanitizer --tool $tool --kernel-name kns=k${k}_ --error-exitcode 9 python3 scripts/sanitize_cache.py --kernel $k "$@" > $R/t/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 )) s: $(grep -E 'sanitize_cache.py kernel|SUMMARY' $R/t/$n.log | tr '\n' ' ')" >> $R/summary.txt; }
s mem67 memcheck 67 --d 96 --heads 32/8,32/32,8/8
s mem67c memcheck 67 --d 96 --heads 32/8,32/32 --capacity 8192 --pages 0,16,256
s race67 racecheck 67 --d 96 --heads 32/8,32/32,8/8
s race67c racecheck 67 --d 96 --heads 32/8,32/32 --capacity 8192 --pages 0,16,256
s mem66 memcheck 66 --d 64,96,128,192
s race66 racecheck 66 --d 64,96,128,192
cd $R && tar czf logs.tar.gz t && rm -rf t && cd - > /dev/null
cat $R/summary.txt
