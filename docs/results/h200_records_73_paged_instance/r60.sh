#!/usr/bin/env bash
# Trials 74 (a paged instance of its own, the split's table lines prefetched into the L1 before
# the first copy) and 75 (the paged instance alone) beside rung 73 on the paged one-row cells
# (ragged lengths, pages of 64 and 256, shuffled and in order); then Nsight Compute on the cell.
set -uo pipefail
R=$OUT; mkdir -p $R/j $R/t
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
python3 build-carry/make_trial_paged_instance.py > $R/t/trial.txt 2>&1
t0=$(date +%s)
( cmake -S . -B build -G Ninja -DFL_KERNELS="73;74;75" -DFL_BUILD_BENCH=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && { grep -E -B2 -A8 "error" $R/t/build.log | head -40; exit 1; }
export FLASH_LADDER_LIB=$PWD/build/libflash_ladder.so
p() { n=$1; k=$2; shift 2; PYTHONUNBUFFERED=1 timeout 120 python3 scripts/paged_bench.py --kernels $k --nq 1 --d 128 --ragged --pages 64,256 --in-order --rounds 5 --out $R/j/$n.json "$@" > $R/t/$n.txt 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt; }
p b8a 73,74,75 --b 8 --nk 32768
p b8b 75,74,73 --b 8 --nk 32768
p b8c 73,74 --b 8 --nk 8192,131072
p b1 73,74 --b 1 --nk 32768,131072
M1=gpu__time_duration.sum,smsp__inst_executed.sum,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,dram__bytes_read.sum,launch__grid_size,launch__registers_per_thread
M2=smsp__inst_executed_op_global_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld_lookup_hit.sum
for arm in "shuffled 74" "shuffled 75" "shuffled 73" "contiguous 74"; do
  set -- $arm
  for m in 1 2; do
    eval MM=\$M$m
    timeout 45 ncu --profile-from-start off --clock-control none -k regex:"decode_kernel" --metrics $MM python3 build-carry/ncu_paged.py $1 $2 > $R/t/ncu_$1_$2_$m.txt 2>&1
    echo "== $1 $2 set $m rc=$? $(( $(date +%s) - t0 )) s" >> $R/brief.txt
    grep -E "gpu__|smsp__|dram__|l1tex__|launch__|ERR" $R/t/ncu_$1_$2_$m.txt | cut -c1-120 >> $R/brief.txt
  done
done
cd $R && tar czf runs.tar.gz t j && cd - > /dev/null
cat $R/summary.txt $R/brief.txt; for n in b8a b8b b8c b1; do grep -v "^ *$" $R/t/$n.txt | tail -12; done
