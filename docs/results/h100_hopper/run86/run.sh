#!/usr/bin/env bash
# Device run 86: the multicast (clusters of two, half of each K/V tile multicast) with three K/V stages
# (M3, O staged in sQ) and with two (M2), against the tree (A): d = 128 non-causal, variants.py, 6 rounds; ncu.
set -uo pipefail
R=/tmp/run86; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
for v in M3 M2; do
  mkdir -p /tmp/src$v && tar cf - --exclude=./build --exclude=./build-* . | tar xf - -C /tmp/src$v
  python3 build-carry/m3/make.py kernels/23_final_hopper/final_hopper.cu /tmp/src$v/kernels/23_final_hopper/final_hopper.cu
done
for x in "build-A . 3" "/tmp/srcM3/build /tmp/srcM3 3" "/tmp/srcM2/build /tmp/srcM2 2"; do set -- $x
  ( cmake -S $2 -B $1 -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" "-DCMAKE_CUDA_FLAGS=-DM_STAGES=$3" >/dev/null 2>&1
    cmake --build $1 -j 5 --target flash_ladder > $R/build_$(echo $2 | tr / _).log 2>&1 || tail -20 $R/build_$(echo $2 | tr / _).log ) &
done; wait
echo "builds $(( $(date +%s)-t0 )) s"
LIBS=A=build-A/libflash_ladder.so,M3=/tmp/srcM3/build/libflash_ladder.so,M2=/tmp/srcM2/build/libflash_ladder.so
timeout 300 python3 build-carry/variants.py --libs $LIBS --rounds 6 --d 128 --n 2048,4096,8192,16384 --out $R/v.json > $R/v_d128.txt 2>&1; echo "d128 rc=$? $(( $(date +%s)-t0 )) s"
tar czf $OUT/run86.tgz -C /tmp run86
for v in A M3 M2; do
  lib=build-A/libflash_ladder.so; [ $v != A ] && lib=/tmp/src$v/build/libflash_ladder.so
  LIB=$lib B=16 NQ=4096 NK=4096 D=128 CAUSAL=0 timeout 60 ncu --kernel-name regex:attention_kernel --launch-skip 1 --launch-count 3 \
    --metrics gpu__time_duration.sum,lts__t_bytes.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active --csv --page raw python3 build-carry/ncu_shape.py > $R/ncu_$v.csv 2> $R/ncu_$v.err
done
echo "ncu $(( $(date +%s)-t0 )) s"
cp build-carry/runAP.sh build-carry/m3/make.py $R/
tar czf $OUT/run86.tgz -C /tmp run86
python3 - <<'PY'
import csv, glob, json, statistics as st
for f in sorted(glob.glob('/tmp/run86/ncu_*.csv')):
    lines = [l for l in open(f) if l.startswith('"')]
    rows = list(csv.DictReader(lines))[1:]
    if not rows: print(f, "no rows"); continue
    g = lambda k: st.median(float(r[k].replace(',', '')) for r in rows)
    print(f"{f.split('/')[-1]:14s} {g('gpu__time_duration.sum')/1e3:8.1f} us  tensor {g('sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active'):5.1f}%  L2 {g('lts__t_bytes.sum')/1e9:6.2f} GB")
for r in json.load(open('/tmp/run86/v.json')):
    ra = r['runs']
    print(r['N'], 'cudnn %.1f' % st.median(ra['cudnn']), ' '.join(f"{k}/A {st.median([x/a for x, a in zip(ra[k], ra['A'])]):.3f}" for k in ('M3', 'M2') if k in ra), r['ok'])
PY
