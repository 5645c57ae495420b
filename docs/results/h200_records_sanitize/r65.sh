#!/usr/bin/env bash
# The hoisted test_paged (working tree): every rung built, PagedLong alone (356.80 s alone at
# main on an H200), the cache grid at -j 9; then, in the time left, the sanitize label's
# memcheck, synccheck and initcheck tests.
set -uo pipefail
R=$OUT; mkdir -p $R/t; t0=$(date +%s)
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > $R/t/gpu.txt
( cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && timeout 400 cmake --build build -j 16 ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && { tail -20 $R/t/build.log; exit 1; }
ctest --test-dir build -N | tail -1 >> $R/summary.txt
timeout 300 ctest --test-dir build --output-on-failure --timeout 290 -R "PagedLong" > $R/t/ctest_long.log 2>&1
echo "long rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt
left=$(( 560 - ($(date +%s) - t0) ))
timeout $left ctest --test-dir build --output-on-failure -j 9 --timeout 400 -R "Cache/Paged" > $R/t/ctest_grid.log 2>&1
echo "grid rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt
left=$(( 575 - ($(date +%s) - t0) ))
if [ $left -gt 60 ]; then
  timeout $left ctest --test-dir build --output-on-failure -L sanitize -R "memcheck|synccheck|initcheck" > $R/t/ctest_san.log 2>&1
  echo "san rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt
  cp -r build/sanitize $R/t/ 2>/dev/null
fi
cd $R && tar czf r65.tar.gz t && cd - >/dev/null
grep -E "Test +#|tests passed|tests failed" $R/t/ctest_*.log | cut -d: -f2- | tail -24; cat $R/t/gpu.txt $R/summary.txt
