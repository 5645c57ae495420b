#!/usr/bin/env bash
# Device run 75: clocks, power and throttle reasons while rung 23 / cuDNN / FA2 run back to back;
# the sweep's event time against the kernels' own durations (torch.profiler) at N = 512-2048.
set -uo pipefail
R=/tmp/run75; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit,power.max_limit --format=csv | tee $R/gpu.txt
nvidia-smi -q -d POWER,CLOCK,PERFORMANCE > $R/smi_q.txt 2>&1
t0=$(date +%s)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1 || exit 1
cmake --build build -j 16 --target flash_ladder >$R/build.log 2>&1 || { grep -E -A5 "error" $R/build.log | head -40; exit 1; }
echo "build $(( $(date +%s)-t0 )) s"
timeout 240 python3 build-carry/power.py --lib build/libflash_ladder.so --out $R > $R/power.txt 2>&1; echo "power rc=$? $(( $(date +%s)-t0 )) s"
cp build-carry/power.py build-carry/runAE.sh $R/
tar czf $OUT/run75.tgz -C /tmp run75
grep -A4 -E "Power Limit|Clocks Event Reasons|Max Clocks" $R/smi_q.txt | head -40
cat $R/power.txt | tail -30
