#!/usr/bin/env bash
# Device run 149: N (a narrow first visit's K and V as boxes of 16 rows) against A at the sweep's one length
# with narrow first visits, d = 256, N = 4096 (16 keys of 80: 4096 = 51 x 80 + 16), non-causal and causal,
# with N = 2048 beside it, and d = 128, N = 2048 / 2049 a third time; balanced, 12 rounds.
set -uo pipefail
R=/tmp/run149; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
cp build-carry/runDA.sh $R/run.sh
mk() { rm -rf /tmp/src$1; mkdir -p /tmp/src$1 && tar cf - --exclude=./build --exclude=./build-* . | tar xf - -C /tmp/src$1
  cp build-carry/v149/$1.cu /tmp/src$1/kernels/23_final_hopper/final_hopper.cu
  cmake -S /tmp/src$1 -B /tmp/src$1/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
  cmake --build /tmp/src$1/build -j 8 --target flash_ladder $2 > $R/build_$1.log 2>&1 || grep -E -A5 "error" $R/build_$1.log | head -30; }
mk A "" & mk N test_gpu &
wait
echo "builds $(( $(date +%s)-t0 )) s"
(cd /tmp/srcN && timeout 150 build/tests/test_gpu --gtest_filter='ShortTiles.Rung23*:*k23*:*23*' > $R/test_N.txt 2>&1; echo "tests N rc=$?"; grep -E "PASSED|FAILED|OK \]" $R/test_N.txt | head -14)
echo "tests $(( $(date +%s)-t0 )) s"
tar czf $OUT/run149.tgz -C /tmp run149
v() { left=$(( 585 - ($(date +%s)-t0) )); [ $left -lt 30 ] && { echo "$name skipped"; return; }
  timeout $left python3 build-carry/variants.py --order balanced --rounds 12 "$@" > $R/v_$name.txt 2>&1; echo "$name rc=$? $(( $(date +%s)-t0 )) s"
  tar czf $OUT/run149.tgz -C /tmp run149; }
L=A=/tmp/srcA/build/libflash_ladder.so,N=/tmp/srcN/build/libflash_ladder.so
name=d256 v --libs $L --d 256 --n 2048,4096 --b 16 --out $R/v_d256.json
name=d256c v --libs $L --d 256 --causal --n 2048,4096 --b 16 --out $R/v_d256c.json
name=d128 v --libs $L --d 128 --n 2048,2049 --b 16 --out $R/v_d128.json
python3 - <<'PY'
import json, glob, statistics as st
med = lambda a, b: st.median([x / y for x, y in zip(a, b)])
for f in sorted(glob.glob('/tmp/run149/v_*.json')):
    rows = {r['N']: r for r in json.load(open(f))}
    for n, r in sorted(rows.items()):
        ra = r['runs']
        extra = ''
        if n % 2 == 1 and n - 1 in rows:  # time(N+1)/time(N) = TFLOP/s(N) / TFLOP/s(N+1) x flops ratio
            rb = rows[n - 1]['runs']
            extra = ' | N+1 cost: ' + ' '.join('%s %.3f' % (X, med(rb[X], ra[X]) * ((n / (n - 1)) ** 2)) for X in ('A', 'N', 'cudnn'))
        print(f.split('/')[-1][2:-5], n, 'N/A %.3f' % med(ra['N'], ra['A']), 'A/cudnn %.3f' % med(ra['A'], ra['cudnn']), 'N/cudnn %.3f' % med(ra['N'], ra['cudnn']), r['ok'], extra)
PY
tar czf $OUT/run149.tgz -C /tmp run149
