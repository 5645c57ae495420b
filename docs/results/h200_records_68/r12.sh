#!/usr/bin/env bash
# Rung 68 alone: Nsight Compute warp states of the d = 96 split kernel (GQA B = 1, 8192 keys); compute-sanitizer on bf16, a larger cache.
set -uo pipefail
R=$OUT; mkdir -p $R/t
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
t0=$(date +%s)
( cmake -S . -B build -G Ninja -DFL_KERNELS="68" -DFL_BUILD_BENCH=OFF -DFL_BUILD_TESTS=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && exit 1
export FLASH_LADDER_LIB=$PWD/build/libflash_ladder.so
timeout 200 ncu --profile-from-start off --clock-control none -k regex:"decode_kernel|cudnn_generated|flash_fwd_splitkv_kernel" \
  --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section InstructionStats \
  --metrics smsp__inst_executed.sum,smsp__cycles_active.avg,sm__cycles_elapsed.avg \
  python3 build-carry/ncu68.py 8192 > $R/t/ncu_8192.txt 2>&1
echo "ncu rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt
grep -E "^  [a-zA-Z_].*\(|Duration|DRAM Throughput|No Eligible|Active Warps Per Scheduler|Warp Cycles Per Issued|spends|smsp__inst_executed.sum" $R/t/ncu_8192.txt | cut -c1-150 > $R/brief.txt
for tool in memcheck racecheck; do
  timeout 150 compute-sanitizer --tool $tool --kernel-name kns=k68_ --error-exitcode 9 python3 scripts/sanitize_cache.py --kernel 68 --dtype bf16 --d 96,192 --pages 0,16 --capacity 8192 > $R/t/san_$tool.txt 2>&1
  echo "sanitize $tool rc=$? $(( $(date +%s) - t0 )) s $(tail -2 $R/t/san_$tool.txt | tr '\n' ' ')" >> $R/summary.txt
done
cd $R && tar czf runs.tar.gz t && rm -rf t && cd - > /dev/null
cat $R/summary.txt; cat $R/brief.txt
