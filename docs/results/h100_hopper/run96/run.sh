#!/usr/bin/env bash
# Device run 96: which half of run 95's change raises the illegal instruction at ragged lengths:
# X = query tiles from the last row only (narrow visits off), T = the tree (both), with -lineinfo; compute-sanitizer on T.
set -uo pipefail
R=/tmp/run96; mkdir -p $R
t0=$(date +%s)
cp build-carry/runAZ.sh $R/run.sh
mkdir -p /tmp/srcX && tar cf - --exclude=./build --exclude=./build-* . | tar xf - -C /tmp/srcX
sed -i 's/const bool narrow = mine.first_keys <= kNarrowKeys;/const bool narrow = false \&\& mine.first_keys <= kNarrowKeys;/' /tmp/srcX/kernels/23_final_hopper/final_hopper.cu
grep -c "const bool narrow = false" /tmp/srcX/kernels/23_final_hopper/final_hopper.cu
( cmake -S /tmp/srcX -B /tmp/srcX/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
  cmake --build /tmp/srcX/build -j 8 --target test_gpu > $R/build_X.log 2>&1 || tail -20 $R/build_X.log ) &
cmake -S . -B build-T -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" -DCMAKE_CUDA_FLAGS=-lineinfo >/dev/null 2>&1
cmake --build build-T -j 8 --target test_gpu > $R/build_T.log 2>&1 || tail -20 $R/build_T.log
wait
echo "builds $(( $(date +%s)-t0 )) s"
F='ShortTiles.Rung23*:*KernelTest.PassesEveryClaimedShape/k23*:*FuzzTest*k23*'
timeout 120 /tmp/srcX/build/tests/test_gpu --gtest_filter="$F" > $R/X.txt 2>&1; echo "X rc=$?"; grep -E "^\[  (PASSED|FAILED)|OK \]|Failure" $R/X.txt | head -12
timeout 120 build-T/tests/test_gpu --gtest_filter="$F" > $R/T.txt 2>&1; echo "T rc=$?"; grep -E "^\[  (PASSED|FAILED)|OK \]" $R/T.txt | head -12
timeout 200 compute-sanitizer --print-limit 5 build-T/tests/test_gpu --gtest_filter='ShortTiles.Rung23PassesAtEveryEdge' > $R/san_T.txt 2>&1; echo "san rc=$?"
grep -E -A12 "=========" $R/san_T.txt | head -40
tar czf $OUT/run96.tgz -C /tmp run96
