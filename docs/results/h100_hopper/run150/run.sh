#!/usr/bin/env bash
# Device run 150: N against A where they compute the same with the consumers' loops byte for byte equal
# (d = 128, N = 2048 read 0.988-0.998 in runs 147-149): 24 rounds, balanced, d = 128 N = 2048 / 2049 and
# d = 64 N = 2048.
set -uo pipefail
R=/tmp/run150; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
cp build-carry/runDB.sh $R/run.sh
mk() { rm -rf /tmp/src$1; mkdir -p /tmp/src$1 && tar cf - --exclude=./build --exclude=./build-* . | tar xf - -C /tmp/src$1
  cp build-carry/v150/$1.cu /tmp/src$1/kernels/23_final_hopper/final_hopper.cu
  cmake -S /tmp/src$1 -B /tmp/src$1/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
  cmake --build /tmp/src$1/build -j 8 --target flash_ladder $2 > $R/build_$1.log 2>&1 || grep -E -A5 "error" $R/build_$1.log | head -30; }
mk A "" & mk N "" &
wait
echo "builds $(( $(date +%s)-t0 )) s"
true
echo "tests $(( $(date +%s)-t0 )) s"
tar czf $OUT/run150.tgz -C /tmp run150
v() { left=$(( 585 - ($(date +%s)-t0) )); [ $left -lt 30 ] && { echo "$name skipped"; return; }
  timeout $left python3 build-carry/variants.py --order balanced --rounds 24 "$@" > $R/v_$name.txt 2>&1; echo "$name rc=$? $(( $(date +%s)-t0 )) s"
  tar czf $OUT/run150.tgz -C /tmp run150; }
L=A=/tmp/srcA/build/libflash_ladder.so,N=/tmp/srcN/build/libflash_ladder.so
name=d128 v --libs $L --d 128 --n 2048,2049 --b 16 --out $R/v_d128.json
name=d64 v --libs $L --d 64 --n 2048 --b 16 --out $R/v_d64.json
python3 - <<'PY'
import json, glob, statistics as st
med = lambda a, b: st.median([x / y for x, y in zip(a, b)])
for f in sorted(glob.glob('/tmp/run150/v_*.json')):
    rows = {r['N']: r for r in json.load(open(f))}
    for n, r in sorted(rows.items()):
        ra = r['runs']
        extra = ''
        if n % 2 == 1 and n - 1 in rows:  # time(N+1)/time(N) = TFLOP/s(N) / TFLOP/s(N+1) x flops ratio
            rb = rows[n - 1]['runs']
            extra = ' | N+1 cost: ' + ' '.join('%s %.3f' % (X, med(rb[X], ra[X]) * ((n / (n - 1)) ** 2)) for X in ('A', 'N', 'cudnn'))
        print(f.split('/')[-1][2:-5], n, 'N/A %.3f' % med(ra['N'], ra['A']), 'A/cudnn %.3f' % med(ra['A'], ra['cudnn']), 'N/cudnn %.3f' % med(ra['N'], ra['cudnn']), r['ok'], extra)
PY
tar czf $OUT/run150.tgz -C /tmp run150
