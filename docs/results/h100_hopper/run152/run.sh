#!/usr/bin/env bash
# Device run 152: the new test ShortTiles.Rung23ItemOfOneNarrowVisitReadsNoStaleRows on the tree (T) and on a mutant
# (M: the 16-row narrow load also in an item of one visit, `w.n > 1` dropped), which it must catch; then the rung 23
# GPU tests on T.
set -uo pipefail
R=/tmp/run152; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
cp build-carry/runDD.sh $R/run.sh
mk() { rm -rf /tmp/src$1; mkdir -p /tmp/src$1 && tar cf - --exclude=./build --exclude=./build-* . | tar xf - -C /tmp/src$1
  [ -f build-carry/v152/$1.cu ] && cp build-carry/v152/$1.cu /tmp/src$1/kernels/23_final_hopper/final_hopper.cu
  cmake -S /tmp/src$1 -B /tmp/src$1/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
  cmake --build /tmp/src$1/build -j 8 --target test_gpu > $R/build_$1.log 2>&1 || grep -E -A5 "error" $R/build_$1.log | head -30; }
mk T & mk M &
wait
echo "builds $(( $(date +%s)-t0 )) s"
for X in T M; do
  (cd /tmp/src$X && timeout 120 build/tests/test_gpu --gtest_filter='ShortTiles.Rung23ItemOfOneNarrowVisitReadsNoStaleRows' > $R/test_new_$X.txt 2>&1; echo "new test on $X rc=$?"; grep -E "OK \]|FAILED \]|Expected|Which is|not_finite|d = " $R/test_new_$X.txt | head -12)
done
(cd /tmp/srcT && timeout 150 build/tests/test_gpu --gtest_filter='ShortTiles.*:*k23*:*23*' > $R/test_T.txt 2>&1; echo "tests T rc=$?"; grep -E "PASSED|FAILED|OK \]" $R/test_T.txt | head -20)
echo "done $(( $(date +%s)-t0 )) s"
tar czf $OUT/run152.tgz -C /tmp run152
