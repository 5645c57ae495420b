#!/usr/bin/env bash
# Device run 125: H (build-carry/v121/H.cu: the row sums summed and inverted while the last P.V runs) against A (the
# tree), the two alone, 16 rounds, on the long cells where run 124's rounds spread; and H's checks: ctest of a rung-23
# build (no sanitize label), scripts/sanitize.sh on rung 23 (four tools, both dtypes), scripts/fuzz.sh 5 6.
set -uo pipefail
R=/tmp/run125; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
cp build-carry/runCC.sh $R/run.sh
rm -rf /tmp/srcH; mkdir -p /tmp/srcH && tar cf - --exclude=./build --exclude=./build-* . | tar xf - -C /tmp/srcH
cp build-carry/v121/H.cu /tmp/srcH/kernels/23_final_hopper/final_hopper.cu
( cmake -S /tmp/srcH -B /tmp/srcH/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
  cmake --build /tmp/srcH/build -j 10 > $R/build_H.log 2>&1 || grep -E -A5 "error" $R/build_H.log | head -30 ) &
[ -f build/build.ninja ] || cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
cmake --build build -j 6 --target flash_ladder > $R/build_A.log 2>&1 || tail -20 $R/build_A.log
wait
echo "builds $(( $(date +%s)-t0 )) s"
( cd /tmp/srcH/build && timeout 200 ctest -LE sanitize --output-on-failure > $R/ctest_H.txt 2>&1; echo "ctest rc=$?" ); tail -3 $R/ctest_H.txt
FL_FUZZ_CASES=50 BUILD=/tmp/srcH/build OUT=$R timeout 100 scripts/fuzz.sh 5 6 > $R/fuzz.txt 2>&1; echo "fuzz rc=$? $(( $(date +%s)-t0 )) s"; tail -3 $R/fuzz.txt
timeout 200 scripts/sanitize.sh --build /tmp/srcH/build --out $R/sanitize > $R/sanitize.txt 2>&1; echo "sanitize rc=$? $(( $(date +%s)-t0 )) s"; tail -2 $R/sanitize.txt
tar czf $OUT/run125.tgz -C /tmp run125
v() { left=$(( 580 - ($(date +%s)-t0) )); [ $left -lt 30 ] && { echo "$name skipped"; return; }
  timeout $left python3 build-carry/variants.py --rounds 16 "$@" > $R/v_$name.txt 2>&1; echo "$name rc=$? $(( $(date +%s)-t0 )) s"
  tar czf $OUT/run125.tgz -C /tmp run125; }
L=A=build/libflash_ladder.so,H=/tmp/srcH/build/libflash_ladder.so
name=d128c v --libs $L --d 128 --causal --n 4096 --b 16 --out $R/v_d128c.json
name=d256 v --libs $L --d 256 --n 2048 --b 16 --out $R/v_d256.json
name=d64 v --libs $L --d 64 --n 4096 --b 16 --out $R/v_d64.json
name=d128 v --libs $L --d 128 --n 4096 --b 16 --out $R/v_d128.json
python3 - <<'PY'
import json, glob, statistics as st
for f in sorted(glob.glob('/tmp/run125/v_*.json')):
    for r in json.load(open(f)):
        ra = r['runs']; x = [m/a for m, a in zip(ra['H'], ra['A'])]
        print(f.split('/')[-1][2:-5], r['N'], 'H/A %.3f' % st.median(x), 'A/cudnn %.3f H/cudnn %.3f' % (st.median([m/a for m, a in zip(ra['A'], ra['cudnn'])]), st.median([m/a for m, a in zip(ra['H'], ra['cudnn'])])), [round(y, 3) for y in x], r['ok'])
PY
tar czf $OUT/run125.tgz -C /tmp run125
