#!/usr/bin/env bash
# Device run 140: H = a first visit's GEMMs as wide as the keys the consumer's rows see (16, 64 or Bc;
# d = 128 causal: consumer 0's half of the diagonal tile), against A (HEAD). Rung 23's GPU tests on H,
# then variants.py --order balanced, 12 rounds.
set -uo pipefail
R=/tmp/run140; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
cp build-carry/runCR.sh $R/run.sh
mk() { rm -rf /tmp/src$1; mkdir -p /tmp/src$1 && tar cf - --exclude=./build --exclude=./build-* . | tar xf - -C /tmp/src$1
  [ -f build-carry/v140/$1.cu ] && cp build-carry/v140/$1.cu /tmp/src$1/kernels/23_final_hopper/final_hopper.cu
  cmake -S /tmp/src$1 -B /tmp/src$1/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
  cmake --build /tmp/src$1/build -j 8 --target flash_ladder $2 > $R/build_$1.log 2>&1 || grep -E -A5 "error" $R/build_$1.log | head -30; }
mk A "" & mk H test_gpu &
wait
echo "builds $(( $(date +%s)-t0 )) s"
(cd /tmp/srcH && timeout 150 build/tests/test_gpu --gtest_filter='ShortTiles.Rung23*:*k23*:*23*' > $R/test_H.txt 2>&1; echo "tests H rc=$?"; grep -E "PASSED|FAILED" $R/test_H.txt | head -12)
echo "tests $(( $(date +%s)-t0 )) s"
tar czf $OUT/run140.tgz -C /tmp run140
v() { left=$(( 585 - ($(date +%s)-t0) )); [ $left -lt 30 ] && { echo "$name skipped"; return; }
  timeout $left python3 build-carry/variants.py --order balanced --rounds 12 "$@" > $R/v_$name.txt 2>&1; echo "$name rc=$? $(( $(date +%s)-t0 )) s"
  tar czf $OUT/run140.tgz -C /tmp run140; }
L=A=/tmp/srcA/build/libflash_ladder.so,H=/tmp/srcH/build/libflash_ladder.so
name=d128c v --libs $L --d 128 --causal --n 2048,4096 --b 16 --out $R/v_d128c.json
name=d64c v --libs $L --d 64 --causal --n 2048,4096 --b 16 --out $R/v_d64c.json
name=d128 v --libs $L --d 128 --n 2048,4096 --b 16 --out $R/v_d128.json
name=d256c v --libs $L --d 256 --causal --n 2048,4096 --b 16 --out $R/v_d256c.json
name=d256 v --libs $L --d 256 --n 2048 --b 16 --out $R/v_d256.json
python3 - <<'PY'
import json, glob, statistics as st
for f in sorted(glob.glob('/tmp/run140/v_*.json')):
    for r in json.load(open(f)):
        ra = r['runs']
        cells = ['%s/A %.3f' % (X, st.median([m/a for m, a in zip(ra[X], ra['A'])])) for X in ('H',) if X in ra]
        print(f.split('/')[-1][2:-5], r['N'], *cells, 'A/cudnn %.3f' % st.median([m/a for m, a in zip(ra['A'], ra['cudnn'])]), 'H/cudnn %.3f' % st.median([m/a for m, a in zip(ra['H'], ra['cudnn'])]), r['ok'])
PY
tar czf $OUT/run140.tgz -C /tmp run140
