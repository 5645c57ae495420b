#!/usr/bin/env bash
# Device run 148: N (a narrow first visit's K and V as boxes of 16 rows) against A again, balanced, 12
# rounds: d = 128 N = 2048-4097, causal 2048 / 2049, d = 256 N = 2080 / 2081 (80 x 26 + 1: a narrow first
# visit at Bc = 80); then compute-sanitizer (scripts/sanitize.sh, four tools, both dtypes) and the long fuzz
# (scripts/fuzz.sh, 200 cases, seeds 1-3) on N's build.
set -uo pipefail
R=/tmp/run148; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
cp build-carry/runCZ.sh $R/run.sh
mk() { rm -rf /tmp/src$1; mkdir -p /tmp/src$1 && tar cf - --exclude=./build --exclude=./build-* . | tar xf - -C /tmp/src$1
  cp build-carry/v148/$1.cu /tmp/src$1/kernels/23_final_hopper/final_hopper.cu
  cmake -S /tmp/src$1 -B /tmp/src$1/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
  cmake --build /tmp/src$1/build -j 8 --target flash_ladder $2 > $R/build_$1.log 2>&1 || grep -E -A5 "error" $R/build_$1.log | head -30; }
mk A ladder & mk N "test_gpu ladder" &
wait
echo "builds $(( $(date +%s)-t0 )) s"
(cd /tmp/srcN && timeout 150 build/tests/test_gpu --gtest_filter='ShortTiles.Rung23*:*k23*:*23*' > $R/test_N.txt 2>&1; echo "tests N rc=$?"; grep -E "PASSED|FAILED|OK \]" $R/test_N.txt | head -14)
echo "tests $(( $(date +%s)-t0 )) s"
tar czf $OUT/run148.tgz -C /tmp run148
v() { left=$(( 585 - ($(date +%s)-t0) )); [ $left -lt 30 ] && { echo "$name skipped"; return; }
  timeout $left python3 build-carry/variants.py --order balanced --rounds 12 "$@" > $R/v_$name.txt 2>&1; echo "$name rc=$? $(( $(date +%s)-t0 )) s"
  tar czf $OUT/run148.tgz -C /tmp run148; }
L=A=/tmp/srcA/build/libflash_ladder.so,N=/tmp/srcN/build/libflash_ladder.so
name=d128 v --libs $L --d 128 --n 2048,2049,4096,4097 --b 16 --out $R/v_d128.json
name=d128c v --libs $L --d 128 --causal --n 2048,2049 --b 16 --out $R/v_d128c.json
name=d256 v --libs $L --d 256 --n 2080,2081 --b 16 --out $R/v_d256.json
left=$(( 570 - ($(date +%s)-t0) ))
(cd /tmp/srcN && timeout $(( left / 2 )) scripts/sanitize.sh --build build --out $R/sanitize > $R/sanitize.txt 2>&1; echo "sanitize rc=$? $(( $(date +%s)-t0 )) s"; tail -3 $R/sanitize.txt)
left=$(( 575 - ($(date +%s)-t0) ))
(cd /tmp/srcN && BUILD=build OUT=$R timeout $left scripts/fuzz.sh > $R/fuzz.txt 2>&1; echo "fuzz rc=$? $(( $(date +%s)-t0 )) s"; tail -3 $R/fuzz.txt)
python3 - <<'PY'
import json, glob, statistics as st
med = lambda a, b: st.median([x / y for x, y in zip(a, b)])
for f in sorted(glob.glob('/tmp/run148/v_*.json')):
    rows = {r['N']: r for r in json.load(open(f))}
    for n, r in sorted(rows.items()):
        ra = r['runs']
        extra = ''
        if n % 2 == 1 and n - 1 in rows:  # time(N+1)/time(N) = TFLOP/s(N) / TFLOP/s(N+1) x flops ratio
            rb = rows[n - 1]['runs']
            extra = ' | N+1 cost: ' + ' '.join('%s %.3f' % (X, med(rb[X], ra[X]) * ((n / (n - 1)) ** 2)) for X in ('A', 'N', 'cudnn'))
        print(f.split('/')[-1][2:-5], n, 'N/A %.3f' % med(ra['N'], ra['A']), 'A/cudnn %.3f' % med(ra['A'], ra['cudnn']), 'N/cudnn %.3f' % med(ra['N'], ra['cudnn']), r['ok'], extra)
PY
tar czf $OUT/run148.tgz -C /tmp run148
