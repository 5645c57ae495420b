#!/usr/bin/env bash
# Nsight Compute on rung 73's paged one-row cell: contiguous, pages of 64 and 256 in order, pages
# of 64 shuffled; time, instructions, long-scoreboard stalls, then the L1's global loads.
set -uo pipefail
R=$OUT; mkdir -p $R/t
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
t0=$(date +%s)
( cmake -S . -B build -G Ninja -DFL_KERNELS="73" -DFL_BUILD_BENCH=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && exit 1
export FLASH_LADDER_LIB=$PWD/build/libflash_ladder.so
M1=gpu__time_duration.sum,smsp__inst_executed.sum,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__issue_active.avg.pct_of_peak_sustained_active,dram__bytes_read.sum,launch__grid_size
M2=smsp__inst_executed_op_global_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld_lookup_hit.sum,l1tex__t_sector_hit_rate.pct
for how in contiguous in_order in_order_256 shuffled; do
  for m in 1 2; do
    eval MM=\$M$m
    timeout 45 ncu --profile-from-start off --clock-control none -k regex:"decode_kernel" --metrics $MM python3 build-carry/ncu_paged.py $how 73 > $R/t/ncu_${how}_$m.txt 2>&1
    echo "== $how set $m rc=$? $(( $(date +%s) - t0 )) s" >> $R/brief.txt
    grep -E "gpu__|smsp__|dram__|l1tex__|launch__|ERR" $R/t/ncu_${how}_$m.txt | cut -c1-120 >> $R/brief.txt
  done
done
cat $R/summary.txt $R/brief.txt
