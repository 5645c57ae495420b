#!/usr/bin/env bash
# Nsight Compute: rungs 67 and 68 on GQA 32/8, 16 query rows, B = 8, 8192 keys, d = 96 (the call rung 68 slows), one process each.
set -uo pipefail
R=$OUT; mkdir -p $R/t
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
t0=$(date +%s)
( cmake -S . -B build -G Ninja -DFL_KERNELS="67;68" -DFL_BUILD_BENCH=OFF -DFL_BUILD_TESTS=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && exit 1
export FLASH_LADDER_LIB=$PWD/build/libflash_ladder.so
for k in 67 68; do
  timeout 150 ncu --profile-from-start off --clock-control none -k regex:"decode_kernel|combine_kernel" \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section InstructionStats --section Occupancy --section LaunchStats \
    --metrics smsp__inst_executed.sum,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_no_instruction_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_dispatch_stall_per_issue_active.ratio \
    python3 build-carry/ncu_q16.py $k > $R/t/ncu_q16_$k.txt 2>&1
  rc=$?; echo "ncu $k rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt
  if [ $rc -ne 0 ]; then
    timeout 150 ncu --profile-from-start off --clock-control none -k regex:"decode_kernel|combine_kernel" \
      --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section InstructionStats --section Occupancy \
      python3 build-carry/ncu_q16.py $k > $R/t/ncu_q16_$k.txt 2>&1
    echo "ncu $k again rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt
  fi
  grep -E "^  [a-zA-Z_].*\(|Duration|DRAM Throughput|Registers Per|Achieved Occupancy|Block Limit|No Eligible|Active Warps Per Scheduler|Warp Cycles Per Issued|spends|smsp__" $R/t/ncu_q16_$k.txt | cut -c1-150 > $R/brief_$k.txt
done
cd $R && tar czf runs.tar.gz t && rm -rf t && cd - > /dev/null
cat $R/summary.txt; cat $R/brief_67.txt $R/brief_68.txt
