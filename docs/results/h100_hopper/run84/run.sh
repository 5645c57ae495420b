#!/usr/bin/env bash
# Device run 84: how fast is one consumer alone? Items of one query tile with 1, 2 (or 3) consumers
# holding rows, Nk = 4096, ncu durations at the locked base clock, A (all consumers compute) and I (idle ones skip).
set -uo pipefail
R=/tmp/run84; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
mkdir -p /tmp/basesrc && tar cf - --exclude=./build --exclude=./build-* . | tar xf - -C /tmp/basesrc
cp build-carry/base_units/final_hopper.cu build-carry/base_units/schedule.cuh /tmp/basesrc/kernels/23_final_hopper/
cp build-carry/base_units/mbarrier.cuh /tmp/basesrc/common/ptx/
for x in "/tmp/basesrc/build-A /tmp/basesrc" "build-I ."; do set -- $x
  ( cmake -S $2 -B $1 -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
    cmake --build $1 -j 8 --target flash_ladder > $R/build_$(basename $1).log 2>&1 || tail -20 $R/build_$(basename $1).log ) &
done; wait
echo "builds $(( $(date +%s)-t0 )) s"
# B = 66, H = 16: 1056 items = 8 per block on 132 SMs.
for s in "66 128 4096 128 0" "66 64 4096 128 0" "66 192 4096 64 0" "66 128 4096 64 0" "66 64 4096 64 0"; do
  set -- $s
  for v in A I; do
    lib=/tmp/basesrc/build-A/libflash_ladder.so; [ $v = I ] && lib=build-I/libflash_ladder.so
    LIB=$lib B=$1 NQ=$2 NK=$3 D=$4 CAUSAL=$5 timeout 60 ncu --kernel-name regex:attention_kernel --launch-skip 1 --launch-count 3 \
      --metrics gpu__time_duration.sum,sm__cycles_elapsed.max,lts__t_bytes.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active --csv --page raw python3 build-carry/ncu_shape.py > $R/ncu_${v}_b$1_q$2_d$4_c$5.csv 2> $R/ncu_${v}_b$1_q$2_d$4_c$5.err
  done
  echo "ncu $s $(( $(date +%s)-t0 )) s"
done
cp build-carry/runAN.sh $R/run.sh
tar czf $OUT/run84.tgz -C /tmp run84
python3 - <<'PY'
import csv, glob, statistics as st, re
for f in sorted(glob.glob('/tmp/run84/ncu_*.csv')):
    lines = [l for l in open(f) if l.startswith('"')]
    rows = list(csv.DictReader(lines))[1:]
    g = lambda k: st.median(float(r[k].replace(',', '')) for r in rows)
    print(f"{f.split('/')[-1]:28s} {g('gpu__time_duration.sum')/1e3:8.1f} us  tensor {g('sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active'):5.1f}%  L2 {g('lts__t_bytes.sum')/1e9:6.2f} GB")
PY
