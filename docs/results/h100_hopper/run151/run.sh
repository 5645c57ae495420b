#!/usr/bin/env bash
# Device run 151: the tree (rung 23 with a narrow first visit's K and V as boxes of 16 rows; SASS byte for byte
# run 147-150's N): the full build, ctest -LE sanitize, ./build/ladder (every kernel verified, the table).
set -uo pipefail
R=/tmp/run151; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
cp build-carry/runDC.sh $R/run.sh
rm -rf build
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >$R/configure.log 2>&1 || { tail -30 $R/configure.log; exit 1; }
cmake --build build -j 16 >$R/build.log 2>&1 || { grep -E -A5 "error" $R/build.log | head -60; exit 1; }
echo "build $(( $(date +%s)-t0 )) s"
timeout 330 ctest --test-dir build --output-on-failure -j 4 --timeout 200 -LE sanitize >$R/ctest.log 2>&1; echo "ctest rc=$? $(( $(date +%s)-t0 )) s"
grep -E "tests passed|tests failed" $R/ctest.log; grep -E "^\s+[0-9]+ - .*(Failed|Timeout|Not Run)" $R/ctest.log | head -20
grep -cE "Skipped|\*\*\*Skipped" $R/ctest.log | sed 's/^/skipped lines: /'
tar czf $OUT/run151.tgz -C /tmp run151
left=$(( 590 - ($(date +%s)-t0) ))
timeout $left ./build/ladder >$R/ladder.txt 2>&1; echo "ladder rc=$? $(( $(date +%s)-t0 )) s fails=$(grep -ciE 'fail' $R/ladder.txt)"
tail -30 $R/ladder.txt
tar czf $OUT/run151.tgz -C /tmp run151
