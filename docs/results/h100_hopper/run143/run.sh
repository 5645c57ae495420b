#!/usr/bin/env bash
# Device run 143: H2 = run 140's H with two compilations, not three: a first visit's GEMMs 64 keys wide when
# the consumer's rows see at most 64 keys of its first tile (N + 1's 16 too), else Bc; the kernel's size is
# the tree's. Is H's 4% loss on whole items the third compilation? Against A (HEAD); rung 23's GPU tests on
# H2, then variants.py --order balanced, 12 rounds.
set -uo pipefail
R=/tmp/run143; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
cp build-carry/runCU.sh $R/run.sh
mk() { rm -rf /tmp/src$1; mkdir -p /tmp/src$1 && tar cf - --exclude=./build --exclude=./build-* . | tar xf - -C /tmp/src$1
  [ -f build-carry/v143/$1.cu ] && cp build-carry/v143/$1.cu /tmp/src$1/kernels/23_final_hopper/final_hopper.cu
  cmake -S /tmp/src$1 -B /tmp/src$1/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
  cmake --build /tmp/src$1/build -j 8 --target flash_ladder $2 > $R/build_$1.log 2>&1 || grep -E -A5 "error" $R/build_$1.log | head -30; }
mk A "" & mk H2 test_gpu &
wait
echo "builds $(( $(date +%s)-t0 )) s"
(cd /tmp/srcH2 && timeout 150 build/tests/test_gpu --gtest_filter='ShortTiles.Rung23*:*k23*:*23*' > $R/test_H2.txt 2>&1; echo "tests H2 rc=$?"; grep -E "PASSED|FAILED" $R/test_H2.txt | head -12)
echo "tests $(( $(date +%s)-t0 )) s"
tar czf $OUT/run143.tgz -C /tmp run143
v() { left=$(( 585 - ($(date +%s)-t0) )); [ $left -lt 30 ] && { echo "$name skipped"; return; }
  timeout $left python3 build-carry/variants.py --order balanced --rounds 12 "$@" > $R/v_$name.txt 2>&1; echo "$name rc=$? $(( $(date +%s)-t0 )) s"
  tar czf $OUT/run143.tgz -C /tmp run143; }
L=A=/tmp/srcA/build/libflash_ladder.so,H2=/tmp/srcH2/build/libflash_ladder.so
name=d128 v --libs $L --d 128 --n 2048,2049,4096 --b 16 --out $R/v_d128.json
name=d128c v --libs $L --d 128 --causal --n 2048,4096 --b 16 --out $R/v_d128c.json
name=d256 v --libs $L --d 256 --n 2048,4096 --b 16 --out $R/v_d256.json
name=d256c v --libs $L --d 256 --causal --n 2048 --b 16 --out $R/v_d256c.json
name=d64c v --libs $L --d 64 --causal --n 2048 --b 16 --out $R/v_d64c.json
python3 - <<'PY'
import json, glob, statistics as st
for f in sorted(glob.glob('/tmp/run143/v_*.json')):
    for r in json.load(open(f)):
        ra = r['runs']
        cells = ['%s/A %.3f' % (X, st.median([m/a for m, a in zip(ra[X], ra['A'])])) for X in ('H2',) if X in ra]
        print(f.split('/')[-1][2:-5], r['N'], *cells, 'A/cudnn %.3f' % st.median([m/a for m, a in zip(ra['A'], ra['cudnn'])]), 'H2/cudnn %.3f' % st.median([m/a for m, a in zip(ra['H2'], ra['cudnn'])]), r['ok'])
PY
tar czf $OUT/run143.tgz -C /tmp run143
