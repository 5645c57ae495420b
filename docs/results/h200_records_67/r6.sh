#!/usr/bin/env bash
# Nsight Compute, fuller sections: rung 67's d = 96 split kernel against cuDNN's and FA2's at GQA 32/8, B = 1, 8192 keys.
set -uo pipefail
R=$OUT; mkdir -p $R
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
t0=$(date +%s)
( cmake -S . -B build -G Ninja -DFL_KERNELS="67" -DFL_BUILD_BENCH=OFF -DFL_BUILD_TESTS=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder ) > $R/build.log 2>&1
echo "build rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt
export FLASH_LADDER_LIB=$PWD/build/libflash_ladder.so
timeout 300 ncu --profile-from-start off --clock-control none -k regex:"decode_kernel|cudnn_generated|flash_fwd_splitkv_kernel" \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section InstructionStats \
  --metrics smsp__inst_executed.sum,l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum,smsp__cycles_active.avg,sm__cycles_elapsed.avg \
  python3 build-carry/ncu67b.py 8192 > $R/ncu_full_8192.txt 2>&1
echo "ncu rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt
grep -E "^  [a-zA-Z_].*\(|Duration|DRAM Throughput|Memory Throughput|Executed Instructions  |Issue Slots Busy|No Eligible|Active Warps Per Scheduler|Eligible Warps Per Scheduler|Warp Cycles Per Issued|Stall|smsp__inst_executed.sum|Achieved Occupancy|Theoretical Occupancy|L2 Hit|L1/TEX Hit|Mem Busy|Max Bandwidth" $R/ncu_full_8192.txt > $R/brief.txt
cat $R/summary.txt; cat $R/brief.txt | head -150
