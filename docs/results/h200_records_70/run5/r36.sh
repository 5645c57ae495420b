#!/usr/bin/env bash
# Nsight Compute: rung 70's split kernel at d = 128, GQA 32/8, B = 8, 32768 keys, 16 query rows.
set -uo pipefail
R=$OUT; mkdir -p $R/t
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
t0=$(date +%s)
( cmake -S . -B build -G Ninja -DFL_KERNELS="70" -DFL_BUILD_BENCH=OFF -DFL_BUILD_TESTS=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && { tail -30 $R/t/build.log; exit 1; }
export FLASH_LADDER_LIB=$PWD/build/libflash_ladder.so
for nq in 16; do
  timeout 120 ncu --profile-from-start off --clock-control none -k regex:"decode_kernel" \
    --section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats --section ComputeWorkloadAnalysis \
    --metrics sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_no_instruction_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__issue_active.avg.pct_of_peak_sustained_active \
    python3 build-carry/ncu_q16d128.py $nq 70 > $R/t/ncu_$nq.txt 2>&1
  echo "ncu nq=$nq rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt
  grep -E "^  [a-zA-Z_].*\(|Duration|DRAM Throughput|Compute \(SM\)|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit|Grid Size|Block Size|Warp Cycles Per Issued|Issue Slots Busy|smsp__|sm__pipe|dram__" $R/t/ncu_$nq.txt | cut -c1-150 > $R/brief_$nq.txt
done
cd $R && tar czf runs.tar.gz t && rm -rf t && cd - > /dev/null
cat $R/summary.txt; cat $R/brief_16.txt
