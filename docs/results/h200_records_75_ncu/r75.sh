#!/usr/bin/env bash
# Nsight Compute on the paged one-row cells at B = 1 and 4 (32768 keys, ragged lengths as
# ncu_paged.py draws them): rung 75's arms and rung 74's shuffled ones; split and combine kernels.
set -uo pipefail
R=$OUT; mkdir -p $R/t; t0=$(date +%s)
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
( cmake -S . -B build -G Ninja -DFL_KERNELS="74;75" -DFL_BUILD_BENCH=OFF -DFL_BUILD_TESTS=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && { tail -20 $R/t/build.log; exit 1; }
export FLASH_LADDER_LIB=$PWD/build/libflash_ladder.so
M=gpu__time_duration.sum,smsp__inst_executed.sum,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__registers_per_thread,launch__grid_size,launch__shared_mem_per_block_dynamic
for arm in "contiguous 75 1" "shuffled 75 1" "in_order 75 1" "shuffled 74 1" "contiguous 75 4" "shuffled 75 4" "shuffled 74 4"; do
  set -- $arm
  timeout 60 ncu --profile-from-start off --clock-control none -k regex:"decode_kernel|combine_kernel" --metrics $M python3 build-carry/ncu_paged.py $1 $2 $3 > $R/t/ncu_$1_$2_$3.txt 2>&1
  echo "== $1 rung $2 B=$3 rc=$? $(( $(date +%s) - t0 )) s" >> $R/brief.txt
  grep -E "decode_kernel|combine_kernel|gpu__|smsp__|dram__|launch__|ERR" $R/t/ncu_$1_$2_$3.txt | sed -E 's/\(fl::AttnParams.*//' | cut -c1-110 >> $R/brief.txt
done
cat $R/brief.txt
