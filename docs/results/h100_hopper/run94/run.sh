#!/usr/bin/env bash
# Device run 94: the tree at 2fd0a2c: scripts/fuzz.sh 5 6 (50 cases a seed) on a build of rung 23.
set -uo pipefail
R=/tmp/run94; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
cmake -S . -B build-san -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
cmake --build build-san -j 16 > $R/build.log 2>&1 || { tail -20 $R/build.log; exit 1; }
echo "build $(( $(date +%s)-t0 )) s"
cp build-carry/runAX.sh $R/run.sh
FL_FUZZ_CASES=50 BUILD=build-san OUT=$R timeout 400 scripts/fuzz.sh 5 6 >$R/fuzz.txt 2>&1; echo "fuzz rc=$? $(( $(date +%s)-t0 )) s"; tail -3 $R/fuzz.txt
ls $R
tar czf $OUT/run94.tgz -C /tmp run94
