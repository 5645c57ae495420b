#!/usr/bin/env bash
# Device run 134: the tree (rung 23 with the narrow first visit's GEMMs, its steps compiled apart, Q's descriptor
# uniform: run 133's Wh, comments tidied): the full build, ctest -LE sanitize, ./build/ladder; a rung-23 build for
# scripts/sanitize.sh (four tools, both dtypes) and scripts/fuzz.sh 5 6 (50 cases a seed).
set -uo pipefail
R=/tmp/run134; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
cp build-carry/runCL.sh $R/run.sh
rm -rf /tmp/s23; mkdir -p /tmp/s23 && tar cf - --exclude=./build --exclude=./build-* . | tar xf - -C /tmp/s23
( cmake -S /tmp/s23 -B /tmp/s23/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
  cmake --build /tmp/s23/build -j 4 > $R/build_23.log 2>&1 || grep -E -A5 "error" $R/build_23.log | head -30 ) &
rm -rf build
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >$R/configure.log 2>&1 || { tail -30 $R/configure.log; exit 1; }
cmake --build build -j 12 >$R/build.log 2>&1 || { grep -E -A5 "error" $R/build.log | head -60; exit 1; }
wait
echo "build $(( $(date +%s)-t0 )) s"
grep -E "23_final_hopper.*(registers|spill)|ptxas.*C75" $R/build.log | head -5
timeout 300 ctest --test-dir build --output-on-failure -j 4 --timeout 200 -LE sanitize >$R/ctest.log 2>&1; echo "ctest rc=$? $(( $(date +%s)-t0 )) s"
grep -E "tests passed|tests failed" $R/ctest.log; grep -E "^\s+[0-9]+ - .*(Failed|Timeout|Not Run)" $R/ctest.log | head -20
tar czf $OUT/run134.tgz -C /tmp run134
timeout 150 ./build/ladder >$R/ladder.txt 2>&1; echo "ladder rc=$? $(( $(date +%s)-t0 )) s"; grep -ciE "fail" $R/ladder.txt; tail -28 $R/ladder.txt
tar czf $OUT/run134.tgz -C /tmp run134
FL_FUZZ_CASES=50 BUILD=/tmp/s23/build OUT=$R timeout 100 scripts/fuzz.sh 5 6 > $R/fuzz.txt 2>&1; echo "fuzz rc=$? $(( $(date +%s)-t0 )) s"; tail -3 $R/fuzz.txt
left=$(( 590 - ($(date +%s)-t0) ))
timeout $left scripts/sanitize.sh --build /tmp/s23/build --out $R/sanitize > $R/sanitize.txt 2>&1; echo "sanitize rc=$? $(( $(date +%s)-t0 )) s"; tail -2 $R/sanitize.txt
tar czf $OUT/run134.tgz -C /tmp run134
