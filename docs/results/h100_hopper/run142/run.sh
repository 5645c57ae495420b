#!/usr/bin/env bash
# Device run 142: T160 = d = 128 with a 128 x 160 tile (Bc 160: 20% fewer steps a key; one Q stage, O's own
# buffer kept; R211, no spill; Wgmma<T, 160> generated into the variant's wgmma_ops.inc), against A (HEAD).
# Rung 23's GPU tests on T160, then variants.py --order balanced, 12 rounds.
set -uo pipefail
R=/tmp/run142; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
cp build-carry/runCT.sh $R/run.sh
mk() { rm -rf /tmp/src$1; mkdir -p /tmp/src$1 && tar cf - --exclude=./build --exclude=./build-* . | tar xf - -C /tmp/src$1
  [ -f build-carry/v142/$1.cu ] && cp build-carry/v142/$1.cu /tmp/src$1/kernels/23_final_hopper/final_hopper.cu
  [ -f build-carry/v142/$1.inc ] && cp build-carry/v142/$1.inc /tmp/src$1/common/ptx/wgmma_ops.inc
  cmake -S /tmp/src$1 -B /tmp/src$1/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
  cmake --build /tmp/src$1/build -j 8 --target flash_ladder $2 > $R/build_$1.log 2>&1 || grep -E -A5 "error" $R/build_$1.log | head -30; }
mk A "" & mk T160 test_gpu &
wait
echo "builds $(( $(date +%s)-t0 )) s"
(cd /tmp/srcT160 && timeout 150 build/tests/test_gpu --gtest_filter='ShortTiles.Rung23*:*k23*:*23*' > $R/test_T160.txt 2>&1; echo "tests T160 rc=$?"; grep -E "PASSED|FAILED" $R/test_T160.txt | head -12)
echo "tests $(( $(date +%s)-t0 )) s"
tar czf $OUT/run142.tgz -C /tmp run142
v() { left=$(( 585 - ($(date +%s)-t0) )); [ $left -lt 30 ] && { echo "$name skipped"; return; }
  timeout $left python3 build-carry/variants.py --order balanced --rounds 12 "$@" > $R/v_$name.txt 2>&1; echo "$name rc=$? $(( $(date +%s)-t0 )) s"
  tar czf $OUT/run142.tgz -C /tmp run142; }
L=A=/tmp/srcA/build/libflash_ladder.so,T160=/tmp/srcT160/build/libflash_ladder.so
name=d128 v --libs $L --d 128 --n 1024,2048,4096,8192 --b 16 --out $R/v_d128.json
name=d128c v --libs $L --d 128 --causal --n 2048,4096,8192 --b 16 --out $R/v_d128c.json
python3 - <<'PY'
import json, glob, statistics as st
for f in sorted(glob.glob('/tmp/run142/v_*.json')):
    for r in json.load(open(f)):
        ra = r['runs']
        cells = ['%s/A %.3f' % (X, st.median([m/a for m, a in zip(ra[X], ra['A'])])) for X in ('T160',) if X in ra]
        print(f.split('/')[-1][2:-5], r['N'], *cells, 'A/cudnn %.3f' % st.median([m/a for m, a in zip(ra['A'], ra['cudnn'])]), 'T160/cudnn %.3f' % st.median([m/a for m, a in zip(ra['T160'], ra['cudnn'])]), r['ok'])
PY
tar czf $OUT/run142.tgz -C /tmp run142
