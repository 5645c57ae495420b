#!/usr/bin/env bash
# The rest of the whole suite (the tests r61 did not reach), by number: ctest -I 0,0,0,n,...
set -uo pipefail
R=$OUT; mkdir -p $R/t; t0=$(date +%s)
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
if [ ! -f build/build.ninja ]; then ( cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && timeout 400 cmake --build build -j 16 ) > $R/t/build.log 2>&1; echo "rebuilt $(( $(date +%s) - t0 )) s" >> $R/summary.txt; fi
left=$(( 575 - ($(date +%s) - t0) ))
timeout $left ctest --test-dir build --output-on-failure -j 12 --timeout 300 -LE sanitize -I 0,0,0,$(cat build-carry/todo.txt) > $R/t/ctest2.log 2>&1
echo "ctest rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt
grep -E "tests passed|tests failed|\(Failed\)|\(Timeout\)|Not Run|\*\*\*Failed|\*\*\*Exception" $R/t/ctest2.log | tail -30
grep -c "Test *#" $R/t/ctest2.log | sed 's/^/tests reported: /'
cat $R/summary.txt
