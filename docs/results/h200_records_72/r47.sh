#!/usr/bin/env bash
# Nsight Compute: rung 72 as kept against rung 71, d = 192, 96, 128 (GQA 32/8, 16 query rows, B = 8, 32768 keys).
set -uo pipefail
R=$OUT; mkdir -p $R
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
t0=$(date +%s)
( cmake -S . -B build -G Ninja -DFL_KERNELS="71;72" -DFL_BUILD_BENCH=OFF -DFL_BUILD_TESTS=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder ) > $R/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && { grep -E -B2 -A8 "error" $R/build.log | head -40; exit 1; }
export FLASH_LADDER_LIB=$PWD/build/libflash_ladder.so
for d in 192 96 128; do for rung in 71 72; do
  timeout 25 ncu --profile-from-start off --clock-control none -k regex:"decode_kernel" \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,lts__t_bytes.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active \
    python3 build-carry/ncu_q16d.py 16 $rung $d > $R/ncu_${d}_$rung.txt 2>&1
  echo "== d=$d rung $rung rc=$? $(( $(date +%s) - t0 )) s" >> $R/brief.txt
  grep -E "gpu__time|dram__|lts__|smsp__|launch__|sm__warps" $R/ncu_${d}_$rung.txt | cut -c1-110 >> $R/brief.txt
done; done
cat $R/summary.txt $R/brief.txt
