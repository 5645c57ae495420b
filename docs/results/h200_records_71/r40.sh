#!/usr/bin/env bash
# Rung 71 against rung 70, a second process: timings (5 rounds), the paged cache, Nsight Compute at d = 192 and 96.
set -uo pipefail
R=$OUT; mkdir -p $R/j $R/t
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
t0=$(date +%s)
( cmake -S . -B build -G Ninja -DFL_KERNELS="70;71" -DFL_BUILD_BENCH=OFF -DFL_BUILD_TESTS=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && { tail -30 $R/t/build.log; exit 1; }
L=$PWD/build/libflash_ladder.so; export FLASH_LADDER_LIB=$L
b() { n=$1; d=$2; shift 2; PYTHONUNBUFFERED=1 timeout 150 python3 scripts/decode_bench.py --lib $L --graphs --kernels 70,71 --d $d --rounds 5 --repeats 30 --out $R/j/$n.json "$@" > $R/t/$n.txt 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt; }
b q96 96 --heads 32/8 --nq 16 --b 32,16,8,4,1 --nk 32768,8192
b q192 192 --heads 32/8 --nq 16 --b 32,16,8,4,1 --nk 32768,8192
b l192 192 --heads 32/8 --nq 8,16 --b 2,1 --nk 131072
for d in 192 96; do
  PYTHONUNBUFFERED=1 timeout 100 python3 scripts/paged_bench.py --kernels 70,71 --nq 16 --d $d --ragged --b 4,8 --nk 32768 --pages 64,256 --rounds 5 --out $R/j/paged$d.json > $R/t/paged$d.txt 2>&1
  echo "paged$d rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt
done
for d in 192 96; do for rung in 70 71; do
  timeout 90 ncu --profile-from-start off --clock-control none -k regex:"decode_kernel" \
    --section SpeedOfLight --section Occupancy --section LaunchStats \
    --metrics smsp__inst_executed.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio \
    python3 build-carry/ncu_q16d.py 16 $rung $d > $R/t/ncu_${d}_$rung.txt 2>&1
  echo "ncu d=$d rung $rung rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt
  grep -E "^  [a-zA-Z_].*\(|Duration|DRAM Throughput|Registers Per|Grid Size|Issue Slots|smsp__|dram__" $R/t/ncu_${d}_$rung.txt | cut -c1-120 >> $R/brief.txt
done; done
python3 build-carry/summ.py $R/j/q*.json $R/j/l*.json > $R/table.txt
cd $R && tar czf runs.tar.gz t j && cd - > /dev/null
cat $R/summary.txt; cat $R/table.txt; for d in 192 96; do sed -n "/^GB/,\$p" $R/t/paged$d.txt | cut -c1-140 | tail -12; done; cat $R/brief.txt
