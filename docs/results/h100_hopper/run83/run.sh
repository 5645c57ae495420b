#!/usr/bin/env bash
# Device run 83: idle consumers (I, the tree) against the kernel before (A): Nsight Compute durations at
# ncu's locked base clock (3 launches each), then variants.py with 8 rounds on the N + 1 shapes.
set -uo pipefail
R=/tmp/run83; mkdir -p $R
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
for s in "16 2048 2048 128 0" "16 2049 2049 128 0" "16 4096 4096 128 0" "16 4097 4097 128 0" "16 2049 2049 128 1" "16 4096 4096 128 1" "16 4097 4097 128 1" \
         "16 2048 2048 64 1" "16 4096 4096 64 1" "16 2048 2048 64 0" "16 4096 4096 64 0" "16 2049 2049 256 0"; do
  set -- $s
  for v in A I; do
    lib=/tmp/basesrc/build-A/libflash_ladder.so; [ $v = I ] && lib=build-I/libflash_ladder.so
    LIB=$lib B=$1 NQ=$2 NK=$3 D=$4 CAUSAL=$5 timeout 60 ncu --kernel-name regex:attention_kernel --launch-skip 1 --launch-count 3 \
      --metrics gpu__time_duration.sum,sm__cycles_elapsed.max --csv --page raw python3 build-carry/ncu_shape.py > $R/ncu_${v}_b$1_q$2_d$4_c$5.csv 2> $R/ncu_${v}_b$1_q$2_d$4_c$5.err
  done
  echo "ncu $s $(( $(date +%s)-t0 )) s"
done
tar czf $OUT/run83.tgz -C /tmp run83
python3 - <<'PY'
import csv, glob, statistics as st, re
res = {}
for f in sorted(glob.glob('/tmp/run83/ncu_*.csv')):
    v, key = re.match(r'.*/ncu_(\w)_(.*)\.csv', f).groups()
    lines = [l for l in open(f) if l.startswith('"')]
    if len(lines) < 3: continue
    rows = list(csv.DictReader(lines))[1:]
    res.setdefault(key, {})[v] = [float(r['gpu__time_duration.sum']) for r in rows]
for key, d in res.items():
    if 'A' in d and 'I' in d:
        a, i = st.median(d['A']), st.median(d['I'])
        print(f"{key:20s} A {a/1e3:9.1f} us ({min(d['A'])/1e3:.1f}-{max(d['A'])/1e3:.1f})  I {i/1e3:9.1f} us ({min(d['I'])/1e3:.1f}-{max(d['I'])/1e3:.1f})  I/A time {i/a:.3f}")
PY
left=$(( 570 - ($(date +%s)-t0) ))
V="python3 build-carry/variants.py --libs A=/tmp/basesrc/build-A/libflash_ladder.so,I=build-I/libflash_ladder.so --rounds 8 --b 16"
timeout $(( left / 2 )) $V --d 128 --n 2049,4097 --out $R/v.json > $R/v_d128.txt 2>&1; echo "d128 rc=$? $(( $(date +%s)-t0 )) s"
left=$(( 580 - ($(date +%s)-t0) ))
timeout $left $V --d 128 --causal --n 2049,4097 --out $R/v.json > $R/v_d128c.txt 2>&1; echo "d128c rc=$? $(( $(date +%s)-t0 )) s"
cp build-carry/runAM.sh build-carry/ncu_shape.py $R/
tar czf $OUT/run83.tgz -C /tmp run83
