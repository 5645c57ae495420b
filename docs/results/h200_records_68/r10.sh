#!/usr/bin/env bash
# Rung 68 against rung 67 again: nine rounds, two processes, d = 96 and 192 where run 1 moved, d = 64/128 level; ncu warp states at d = 96.
set -uo pipefail
R=$OUT; mkdir -p $R/j $R/t
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
t0=$(date +%s)
( cmake -S . -B build -G Ninja -DFL_KERNELS="67;68" -DFL_BUILD_BENCH=OFF -DFL_BUILD_TESTS=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && { grep -E -B2 -A8 "error" $R/t/build.log | head -40; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $R/summary.txt
L=$PWD/build/libflash_ladder.so; export FLASH_LADDER_LIB=$L
b() { n=$1; d=$2; shift 2; PYTHONUNBUFFERED=1 timeout 150 python3 scripts/decode_bench.py --lib $L --graphs --kernels 67,68 --d $d --rounds 9 --repeats 30 --out $R/j/$n.json "$@" > $R/t/$n.txt 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt; }
for p in a b; do
  b g96$p 96 --heads 32/8 --b 1 --nk 1024,8192,32768,131072 --nq 1
  b h96$p 96 --heads 32/8 --b 2,8 --nk 1024,32768 --nq 1
  b m96$p 96 --heads 32/32 --b 1 --nk 1024,8192 --nq 1
  b q96$p 96 --heads 32/8 --b 1,8 --nk 8192 --nq 16
  b g192$p 192 --heads 32/8 --b 1,8 --nk 8192,32768 --nq 1
  b m192$p 192 --heads 32/32 --b 1 --nk 8192 --nq 1
  b x$p 128 --heads 32/8 --b 1,8 --nk 8192 --nq 1
  b y$p 64 --heads 32/8 --b 1,8 --nk 8192 --nq 1
done
python3 build-carry/summ.py $R/j/*.json > $R/table.txt
sed -i 's/kernel=66/kernel=68/' build-carry/ncu67b.py
timeout 200 ncu --profile-from-start off --clock-control none -k regex:"decode_kernel|cudnn_generated|flash_fwd_splitkv_kernel" \
  --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section InstructionStats \
  --metrics smsp__inst_executed.sum,smsp__cycles_active.avg,sm__cycles_elapsed.avg \
  python3 build-carry/ncu67b.py 8192 > $R/t/ncu_8192.txt 2>&1
echo "ncu rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt
grep -E "^  [a-zA-Z_].*\(|Duration|DRAM Throughput|Executed Instructions  |Issue Slots Busy|No Eligible|Active Warps Per Scheduler|Warp Cycles Per Issued|Stall|stalled|smsp__inst_executed.sum" $R/t/ncu_8192.txt > $R/brief.txt
cd $R && tar czf runs.tar.gz t j && rm -rf t j && cd - > /dev/null
cat $R/summary.txt; cat $R/table.txt; head -80 $R/brief.txt
