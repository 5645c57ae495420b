#!/usr/bin/env bash
# Device run 122: the %globaltimer trace (mktrace.py's stamps) of A (the tree; build-carry/v119) and of E1 (run 121:
# the next item found and the row sums inverted while the last P.V runs; v121/E1_trace.cu), d = 128, N = 512, 1024, 4096.
set -uo pipefail
R=/tmp/run122; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
cp build-carry/runBZ.sh $R/run.sh; cp build-carry/trace.py build-carry/mktrace.py $R/
mk() { rm -rf /tmp/src$1; mkdir -p /tmp/src$1 && tar cf - --exclude=./build --exclude=./build-* . | tar xf - -C /tmp/src$1
  cp $2 /tmp/src$1/kernels/23_final_hopper/final_hopper.cu
  cmake -S /tmp/src$1 -B /tmp/src$1/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
  cmake --build /tmp/src$1/build -j 8 --target ladder > $R/build_$1.log 2>&1 || grep -E -A5 "error" $R/build_$1.log | head -30; }
mk TA build-carry/v119/final_hopper.cu & mk TE1 build-carry/v121/E1_trace.cu &
wait
echo "builds $(( $(date +%s)-t0 )) s"
for v in TA TE1; do for n in 512 1024 4096; do
  FL23_TRACE=$R/tr_${v}_$n.txt /tmp/src$v/build/ladder --kernel 23 --n $n --batch 16 --warmup 3 --repeats 1 --no-verify > /dev/null 2>&1; done; done
for n in 512 1024 4096; do python3 build-carry/trace.py $R/tr_TA_$n.txt $R/tr_TE1_$n.txt; done > $R/summary.txt
grep -E "==|tensor idle|c0 (pack_o|item_of|loop tail|Q wait|K wait|turn wait|last P.V done|first S)" $R/summary.txt
tar czf $OUT/run122.tgz -C /tmp run122
