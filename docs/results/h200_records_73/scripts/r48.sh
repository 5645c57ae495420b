#!/usr/bin/env bash
# d = 96 with TMA: rung 72 against rung 71 and two probes (73: L2 promotion 64 B at d = 96; 74:
# d = 96 keeps cp.async); Nsight Compute's DRAM bytes at d = 96; the shuffled pages' profile.
set -uo pipefail
R=$OUT; mkdir -p $R/j $R/t
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
cp -r build-carry/tried/73_trial_d96_l2_64 build-carry/tried/74_trial_d96_cp_async kernels/
t0=$(date +%s)
( cmake -S . -B build -G Ninja -DFL_KERNELS="71;72;73;74" -DFL_BUILD_BENCH=OFF -DFL_BUILD_TESTS=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && { grep -E -B2 -A8 "error" $R/t/build.log | head -40; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $R/summary.txt
L=$PWD/build/libflash_ladder.so; export FLASH_LADDER_LIB=$L
b() { n=$1; d=$2; shift 2; PYTHONUNBUFFERED=1 timeout 120 python3 scripts/decode_bench.py --lib $L --graphs --kernels 71,72,73,74 --d $d --repeats 20 --out $R/j/$n.json "$@" > $R/t/$n.txt 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt; }
b q96 96 --heads 32/8 --nq 16 --b 1,8,32 --nk 8192,32768 --rounds 5
b q96m 96 --heads 32/32 --nq 16 --b 1,8 --nk 8192,32768 --rounds 3
M=gpu__time_duration.sum,dram__bytes_read.sum,lts__t_bytes.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_op_read_hit_rate.pct,smsp__inst_executed.sum
for rung in 71 72 73 74; do
  timeout 40 ncu --profile-from-start off --clock-control none -k regex:"decode_kernel" --metrics $M \
    python3 build-carry/ncu_q16d.py 16 $rung 96 > $R/t/ncu_96_$rung.txt 2>&1
  echo "== d=96 rung $rung rc=$? $(( $(date +%s) - t0 )) s" >> $R/brief.txt
  grep -E "gpu__time|dram__|lts__|smsp__" $R/t/ncu_96_$rung.txt | cut -c1-110 >> $R/brief.txt
done
for how in contiguous in_order shuffled; do
  timeout 60 ncu --profile-from-start off --clock-control none -k regex:"decode_kernel" --metrics $M,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_requests_srcunit_tex_op_read.sum,dram__sectors_read.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ldgsts.sum,smsp__average_warp_latency_issue_stalled_long_scoreboard.ratio,smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct \
    python3 build-carry/ncu_paged.py $how 72 > $R/t/ncu_paged_$how.txt 2>&1
  echo "== paged $how rc=$? $(( $(date +%s) - t0 )) s" >> $R/brief.txt
  grep -E "gpu__time|dram__|lts__|smsp__|l1tex" $R/t/ncu_paged_$how.txt | cut -c1-120 >> $R/brief.txt
done
python3 build-carry/summ.py $R/j/q*.json > $R/table.txt
cd $R && tar czf runs.tar.gz t j && cd - > /dev/null
cat $R/summary.txt; cat $R/brief.txt; cat $R/table.txt
