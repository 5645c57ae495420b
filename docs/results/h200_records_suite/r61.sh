#!/usr/bin/env bash
# The whole test suite at HEAD on the GPU: every rung built (sm_90), ctest without the sanitize
# label (those have their own stage), 12 at once, under a wall limit; then a summary.
set -uo pipefail
R=$OUT; mkdir -p $R/t
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/t/gpu.txt
git log --oneline -1 > $R/t/head.txt 2>/dev/null || true
( cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && timeout 400 cmake --build build -j 16 ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && { grep -E -B2 -A8 "error|FAILED" $R/t/build.log | head -40; tail -5 $R/t/build.log; cat $R/summary.txt; exit 1; }
left=$(( 575 - ($(date +%s) - t0) ))
echo "ctest budget $left s" >> $R/summary.txt
timeout $left ctest --test-dir build --output-on-failure -j 12 --timeout 300 -LE sanitize > $R/t/ctest.log 2>&1
echo "ctest rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt
cp build/Testing/Temporary/LastTest.log $R/t/LastTest.log 2>/dev/null
cd $R && tar czf runs.tar.gz t && cd - > /dev/null
grep -E "tests passed|tests failed|\(Failed\)|\(Timeout\)|Not Run|\*\*\*Failed|\*\*\*Exception" $R/t/ctest.log | tail -30
grep -c "Test *#" $R/t/ctest.log | sed 's/^/tests reported: /'
grep -E "Test *#.*Passed" $R/t/ctest.log | wc -l | sed 's/^/passed lines: /'
grep -E "Skipped" $R/t/ctest.log | wc -l | sed 's/^/skipped lines: /'
cat $R/summary.txt
