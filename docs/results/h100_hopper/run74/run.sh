#!/usr/bin/env bash
# Device run 74: fuzz on a build of rung 23 (the tree, two Q stages), seeds 5 and 6, 50 cases each.
set -uo pipefail
R=/tmp/run74; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
cmake -S . -B build-san -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DFL_KERNELS=23 >/dev/null 2>&1 && cmake --build build-san -j 16 --target ladder test_gpu >$R/build_san.log 2>&1 || { echo "build failed"; tail -20 $R/build_san.log; }
echo "build $(( $(date +%s)-t0 )) s"
FL_FUZZ_CASES=50 BUILD=build-san OUT=$R timeout 300 scripts/fuzz.sh 5 6 >$R/fuzz.txt 2>&1; echo "fuzz rc=$?"; tail -3 $R/fuzz.txt
echo "total $(( $(date +%s)-t0 )) s"
tar czf $OUT/run74.tgz -C /tmp run74
