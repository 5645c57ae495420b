#!/usr/bin/env bash
# Nsight Compute: rung 66, rung 67 and the peers at d = 96, GQA 32/8, B = 1, 8192 and 32768 keys.
set -uo pipefail
R=$OUT; mkdir -p $R
t0=$(date +%s)
( cmake -S . -B build -G Ninja -DFL_KERNELS="66;67" -DFL_BUILD_BENCH=OFF -DFL_BUILD_TESTS=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder ) > $R/build.log 2>&1
echo "build rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt
export FLASH_LADDER_LIB=$PWD/build/libflash_ladder.so
for nk in 8192 32768; do
  timeout 200 ncu --profile-from-start off --clock-control none --section SpeedOfLight --section Occupancy --section LaunchStats \
    --metrics dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__cycles_active.avg,sm__warps_active.avg.pct_of_peak_sustained_active \
    python3 build-carry/ncu67.py $nk > $R/ncu_$nk.txt 2>&1
  echo "ncu $nk rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt
done
for nk in 8192 32768; do echo "== $nk"; grep -E "^  [a-zA-Z_].*\(|Duration|DRAM Throughput|dram__bytes_read.sum|Grid Size|Registers Per|Achieved Occupancy|Waves Per SM|Dynamic Shared|sm__cycles_active.avg " $R/ncu_$nk.txt; done > $R/brief.txt
cat $R/summary.txt; cat $R/brief.txt
