#!/usr/bin/env bash
# Device run 119: rung 23 with %globaltimer stamps (build-carry/v119: a diagnostic build; the stamps' stores are
# its only change), one launch traced per shape: where an item's time goes at N = 512 and 1024 against 4096.
set -uo pipefail
R=/tmp/run119; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
cp build-carry/runBW.sh $R/run.sh; cp build-carry/trace.py $R/
rm -rf /tmp/srcT; mkdir -p /tmp/srcT && tar cf - --exclude=./build --exclude=./build-* . | tar xf - -C /tmp/srcT
cp build-carry/v119/final_hopper.cu /tmp/srcT/kernels/23_final_hopper/
cmake -S /tmp/srcT -B /tmp/srcT/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
cmake --build /tmp/srcT/build -j 16 --target ladder > $R/build_T.log 2>&1 || { grep -E -A5 "error" $R/build_T.log | head -30; }
echo "build $(( $(date +%s)-t0 )) s"
L=/tmp/srcT/build/ladder
for c in "512 16" "1024 16" "2048 16" "4096 16"; do set -- $c
  FL23_TRACE=$R/tr_d128_$1.txt $L --kernel 23 --n $1 --batch $2 --warmup 3 --repeats 1 --no-verify > $R/ladder_$1.txt 2>&1; done
FL23_TRACE=$R/tr_d128c_4096.txt $L --kernel 23 --n 4096 --batch 16 --causal --warmup 3 --repeats 1 --no-verify > $R/ladder_c4096.txt 2>&1
FL23_TRACE=$R/tr_d64_512.txt $L --kernel 23 --n 512 --batch 16 --d 64 --warmup 3 --repeats 1 --no-verify > $R/ladder_d64.txt 2>&1
$L --kernel 23 --n 512 --batch 16 --warmup 3 --repeats 20 > $R/ladder_untraced_512.txt 2>&1
echo "runs $(( $(date +%s)-t0 )) s"
python3 build-carry/trace.py $R/tr_*.txt | tee $R/summary.txt
tail -3 $R/ladder_untraced_512.txt
tar czf $OUT/run119.tgz -C /tmp run119
