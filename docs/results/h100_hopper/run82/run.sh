#!/usr/bin/env bash
# Device run 82: rung 23 with idle consumers (I, the tree) against the kernel before (A, HEAD d3a46f3):
# rung 23's GPU tests and ShortTiles on I, then both in one process with cuDNN/FA2 (variants.py).
set -uo pipefail
R=/tmp/run82; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
mkdir -p /tmp/basesrc && tar cf - --exclude=./build --exclude=./build-* . | tar xf - -C /tmp/basesrc
cp build-carry/base_units/final_hopper.cu build-carry/base_units/schedule.cuh /tmp/basesrc/kernels/23_final_hopper/
cp build-carry/base_units/mbarrier.cuh /tmp/basesrc/common/ptx/
( cmake -S /tmp/basesrc -B /tmp/basesrc/build-A -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
  cmake --build /tmp/basesrc/build-A -j 6 --target flash_ladder > $R/build_A.log 2>&1 || tail -20 $R/build_A.log ) &
cmake -S . -B build-I -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=16;23" >/dev/null 2>&1
cmake --build build-I -j 10 --target flash_ladder test_gpu > $R/build_I.log 2>&1 || { grep -E -A5 "error" $R/build_I.log | head -40; exit 1; }
wait
echo "builds $(( $(date +%s)-t0 )) s"
timeout 150 ./build-I/tests/test_gpu --gtest_filter='*23_final_hopper*:ShortTiles.*' >$R/gpu23.log 2>&1; echo "gpu23 rc=$? $(( $(date +%s)-t0 )) s"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $R/gpu23.log | head -20
tar czf $OUT/run82.tgz -C /tmp run82
V="python3 build-carry/variants.py --libs A=/tmp/basesrc/build-A/libflash_ladder.so,I=build-I/libflash_ladder.so --rounds 4"
timeout 150 $V --d 128 --n 2048,2049,4096,4097,8192 --out $R/v.json > $R/v_d128.txt 2>&1; echo "d128 rc=$? $(( $(date +%s)-t0 )) s"
tar czf $OUT/run82.tgz -C /tmp run82
timeout 100 $V --d 128 --causal --n 2048,2049,4096,4097 --out $R/v.json > $R/v_d128c.txt 2>&1; echo "d128c rc=$? $(( $(date +%s)-t0 )) s"
tar czf $OUT/run82.tgz -C /tmp run82
left=$(( 570 - ($(date +%s)-t0) ))
timeout $left $V --d 64 --causal --n 2048,4096,8192 --out $R/v.json > $R/v_d64c.txt 2>&1; echo "d64c rc=$? $(( $(date +%s)-t0 )) s"
left=$(( 585 - ($(date +%s)-t0) ))
[ $left -gt 30 ] && { timeout $left $V --d 64 --n 2048,4096 --out $R/v.json > $R/v_d64.txt 2>&1; echo "d64 rc=$?"; }
cp build-carry/runAL.sh $R/run.sh
echo "total $(( $(date +%s)-t0 )) s"
tar czf $OUT/run82.tgz -C /tmp run82
cat $R/v_*.txt | grep "^d="
