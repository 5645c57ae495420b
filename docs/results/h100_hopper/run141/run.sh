#!/usr/bin/env bash
# Device run 141: T80 = d = 128 with three consumers and a 192 x 80 tile (K/V read 2/3 as often a FLOP;
# 160 registers, ptxas spills 88 B outside the loops), against A (HEAD). Rung 23's GPU tests on T80,
# then variants.py --order balanced, 12 rounds.
set -uo pipefail
R=/tmp/run141; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
cp build-carry/runCS.sh $R/run.sh
mk() { rm -rf /tmp/src$1; mkdir -p /tmp/src$1 && tar cf - --exclude=./build --exclude=./build-* . | tar xf - -C /tmp/src$1
  [ -f build-carry/v141/$1.cu ] && cp build-carry/v141/$1.cu /tmp/src$1/kernels/23_final_hopper/final_hopper.cu
  cmake -S /tmp/src$1 -B /tmp/src$1/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
  cmake --build /tmp/src$1/build -j 8 --target flash_ladder $2 > $R/build_$1.log 2>&1 || grep -E -A5 "error" $R/build_$1.log | head -30; }
mk A "" & mk T80 test_gpu &
wait
echo "builds $(( $(date +%s)-t0 )) s"
(cd /tmp/srcT80 && timeout 150 build/tests/test_gpu --gtest_filter='ShortTiles.Rung23*:*k23*:*23*' > $R/test_T80.txt 2>&1; echo "tests T80 rc=$?"; grep -E "PASSED|FAILED" $R/test_T80.txt | head -12)
echo "tests $(( $(date +%s)-t0 )) s"
tar czf $OUT/run141.tgz -C /tmp run141
v() { left=$(( 585 - ($(date +%s)-t0) )); [ $left -lt 30 ] && { echo "$name skipped"; return; }
  timeout $left python3 build-carry/variants.py --order balanced --rounds 12 "$@" > $R/v_$name.txt 2>&1; echo "$name rc=$? $(( $(date +%s)-t0 )) s"
  tar czf $OUT/run141.tgz -C /tmp run141; }
L=A=/tmp/srcA/build/libflash_ladder.so,T80=/tmp/srcT80/build/libflash_ladder.so
name=d128 v --libs $L --d 128 --n 1024,2048,4096,8192 --b 16 --out $R/v_d128.json
name=d128c v --libs $L --d 128 --causal --n 2048,4096,8192 --b 16 --out $R/v_d128c.json
python3 - <<'PY'
import json, glob, statistics as st
for f in sorted(glob.glob('/tmp/run141/v_*.json')):
    for r in json.load(open(f)):
        ra = r['runs']
        cells = ['%s/A %.3f' % (X, st.median([m/a for m, a in zip(ra[X], ra['A'])])) for X in ('T80',) if X in ra]
        print(f.split('/')[-1][2:-5], r['N'], *cells, 'A/cudnn %.3f' % st.median([m/a for m, a in zip(ra['A'], ra['cudnn'])]), 'T80/cudnn %.3f' % st.median([m/a for m, a in zip(ra['T80'], ra['cudnn'])]), r['ok'])
PY
tar czf $OUT/run141.tgz -C /tmp run141
