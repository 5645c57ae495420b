#!/usr/bin/env bash
# Trials 74 and 75 (never rungs): the split's block-table entries in shared memory for the
# one-row cluster launches (74: the table pointer moved there, generic loads; 75: a branch and a
# shared load), beside rung 73 on the paged one-row cells; the cache grid over the three; ncu.
set -uo pipefail
R=$OUT; mkdir -p $R/j $R/t
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
python3 build-carry/make_trial_table_smem.py > $R/t/trial.txt 2>&1
t0=$(date +%s)
( cmake -S . -B build -G Ninja -DFL_KERNELS="73;74;75" -DFL_BUILD_BENCH=OFF -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_CUDA_FLAGS="--resource-usage" && cmake --build build -j 16 --target flash_ladder test_paged ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && { grep -E -B2 -A8 "error" $R/t/build.log | head -40; exit 1; }
export FLASH_LADDER_LIB=$PWD/build/libflash_ladder.so
p() { n=$1; k=$2; shift 2; PYTHONUNBUFFERED=1 timeout 120 python3 scripts/paged_bench.py --kernels $k --nq 1 --d 128 --ragged --pages 64,256 --in-order --rounds 5 --out $R/j/$n.json "$@" > $R/t/$n.txt 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt; }
p b8a 73,74,75 --b 8 --nk 32768
p b8b 75,74,73 --b 8 --nk 32768
p b8c 73,74,75 --b 8 --nk 8192,131072
p b24 73,74,75 --b 2,4 --nk 32768
timeout 150 ./build/tests/test_paged --gtest_filter='Cache/Paged.*:PagedLong.*' > $R/t/test_paged.txt 2>&1
echo "test_paged rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt
M1=gpu__time_duration.sum,smsp__inst_executed.sum,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,dram__bytes_read.sum,launch__registers_per_thread,launch__grid_size
for arm in "shuffled 73" "shuffled 74" "shuffled 75" "contiguous 73" "contiguous 74"; do
  set -- $arm
  timeout 45 ncu --profile-from-start off --clock-control none -k regex:"decode_kernel" --metrics $M1 python3 build-carry/ncu_paged.py $1 $2 > $R/t/ncu_$1_$2.txt 2>&1
  echo "== $1 $2 rc=$? $(( $(date +%s) - t0 )) s" >> $R/brief.txt
  grep -E "gpu__|smsp__|dram__|launch__|ERR" $R/t/ncu_$1_$2.txt | cut -c1-120 >> $R/brief.txt
done
awk '/Compiling entry function/{n=$0} /Used [0-9]+ registers/{ if (n ~ /decode_kernelI6__halfLi128ELi64ELb1ELb[01]/) {match(n,/k7[345]_[a-z_]*|Lb1ELb[01]/); a=substr(n,RSTART,RLENGTH); match(n,/Lb1ELb[01]E/); print a, substr(n,RSTART,RLENGTH), $5, $6}; n=""}' $R/t/build.log >> $R/brief.txt
cd $R && tar czf runs.tar.gz t j && cd - > /dev/null
cat $R/summary.txt $R/brief.txt; tail -3 $R/t/test_paged.txt; for n in b8a b8b b8c b24; do grep -v "^ *$" $R/t/$n.txt | tail -9; done
