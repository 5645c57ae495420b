#!/usr/bin/env bash
# Rung 73: the package's K/V cache tests with best on rung 73 (rung 39 built for them); rung 72
# against 73 outside decode_bench (eager, events) and under Nsight Compute at base clocks.
set -uo pipefail
R=$OUT; mkdir -p $R/t
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
t0=$(date +%s)
( cmake -S . -B build -G Ninja -DFL_KERNELS="39;72;73" -DFL_BUILD_BENCH=OFF -DFL_BUILD_TESTS=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && { grep -E -B2 -A8 "error" $R/t/build.log | head -40; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $R/summary.txt
L=$PWD/build/libflash_ladder.so; export FLASH_LADDER_LIB=$L
( cd python/tests && timeout 150 python3 -m unittest -v test_kvcache_gpu ) > $R/t/kvcache.txt 2>&1
echo "kvcache rc=$? $(tail -1 $R/t/kvcache.txt) $(( $(date +%s) - t0 )) s" >> $R/summary.txt
timeout 150 python3 build-carry/time_ctx.py > $R/t/ctx.txt 2>&1
echo "ctx rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__issue_active.avg.pct_of_peak_sustained_active,launch__grid_size,gpc__cycles_elapsed.avg.per_second
for cc in base none; do for bk in "20 8192" "24 32768"; do for rung in 72 73; do
  set -- $bk
  timeout 40 ncu --profile-from-start off --clock-control $cc -k regex:"decode_kernel|combine_kernel" --metrics $M \
    python3 build-carry/ncu_b.py 16 $rung 128 $1 $2 > $R/t/ncu_${cc}_${1}_${2}_$rung.txt 2>&1
  echo "== clocks $cc B=$1 Nk=$2 rung $rung rc=$? $(( $(date +%s) - t0 )) s" >> $R/brief.txt
  grep -E "decode_kernel|combine_kernel|gpu__time|dram__|smsp__|launch__|gpc__" $R/t/ncu_${cc}_${1}_${2}_$rung.txt | cut -c1-100 >> $R/brief.txt
done; done; done
cd $R && tar czf runs.tar.gz t && cd - > /dev/null
cat $R/summary.txt; cat $R/t/ctx.txt; cat $R/brief.txt; grep -E "FAIL|ERROR|skipped" $R/t/kvcache.txt | head
