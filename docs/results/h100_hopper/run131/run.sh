#!/usr/bin/env bash
# Device run 131: the narrow first visit's GEMMs again (page 23, "Tiles counted from the last row": W was 2-3% slower on
# whole items in alternating order, whose bias run 126 found). Wb: the narrow visit's P.V one k-step (step 1), S whole
# (plain loop's SASS as A's); Wf: S of N = 16 too, the item body instantiated twice (narrow or not). Rung 23's GPU tests
# on both; variants.py --order balanced, 12 rounds, A / Wb / Wf; plus1_bench (run 128's command) on each.
set -uo pipefail
R=/tmp/run131; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
cp build-carry/runCI.sh $R/run.sh; cp build-carry/v131/*.cu $R/
mk() { rm -rf /tmp/src$1; mkdir -p /tmp/src$1 && tar cf - --exclude=./build --exclude=./build-* . | tar xf - -C /tmp/src$1
  cp build-carry/v131/$1.cu /tmp/src$1/kernels/23_final_hopper/final_hopper.cu
  cmake -S /tmp/src$1 -B /tmp/src$1/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
  cmake --build /tmp/src$1/build -j 5 --target flash_ladder test_gpu > $R/build_$1.log 2>&1 || grep -E -A5 "error" $R/build_$1.log | head -30; }
mk Wb & mk Wf &
rm -rf build; cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
cmake --build build -j 5 --target flash_ladder > $R/build_A.log 2>&1 || tail -20 $R/build_A.log
wait
echo "builds $(( $(date +%s)-t0 )) s"
for X in Wb Wf; do
  timeout 120 /tmp/src$X/build/tests/test_gpu --gtest_filter='ShortTiles.Rung23*:*k23*:*23*' > $R/T_$X.txt 2>&1; echo "T_$X rc=$?"
  grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $R/T_$X.txt | head -6
done
echo "tests $(( $(date +%s)-t0 )) s"
v() { left=$(( 470 - ($(date +%s)-t0) )); [ $left -lt 30 ] && { echo "$name skipped"; return; }
  timeout $left python3 build-carry/variants.py --order balanced --rounds 12 "$@" > $R/v_$name.txt 2>&1; echo "$name rc=$? $(( $(date +%s)-t0 )) s"
  tar czf $OUT/run131.tgz -C /tmp run131; }
L=A=build/libflash_ladder.so,Wb=/tmp/srcWb/build/libflash_ladder.so,Wf=/tmp/srcWf/build/libflash_ladder.so
name=d128 v --libs $L --d 128 --n 512,2048,2049,4096,4097 --b 16 --out $R/v_d128.json
name=d128c v --libs $L --d 128 --causal --n 2048,2049,4096,4097 --b 16 --out $R/v_d128c.json
name=d256 v --libs $L --d 256 --n 2048,2049 --b 16 --out $R/v_d256.json
name=d64c v --libs $L --d 64 --causal --n 2048,2049 --b 16 --out $R/v_d64c.json
for X in A Wb Wf; do
  case $X in A) P=build/libflash_ladder.so ;; *) P=/tmp/src$X/build/libflash_ladder.so ;; esac
  left=$(( 585 - ($(date +%s)-t0) ))
  [ $left -gt 45 ] && { timeout $left python3 scripts/plus1_bench.py --lib $P --kernel 23 --pairs 16:2048,16:4096 --causal-pairs 16:2048,16:4096 --rounds 4 --repeats 15 --out $R/plus1_$X.json > $R/plus1_$X.txt 2>&1; echo "plus1 $X rc=$? $(( $(date +%s)-t0 )) s"; }
  tar czf $OUT/run131.tgz -C /tmp run131
done
python3 - <<'PY'
import json, glob, statistics as st
for f in sorted(glob.glob('/tmp/run131/v_*.json')):
    for r in json.load(open(f)):
        ra = r['runs']
        cells = ['%s/A %.3f' % (X, st.median([m/a for m, a in zip(ra[X], ra['A'])])) for X in ('Wb', 'Wf') if X in ra]
        print(f.split('/')[-1][2:-5], r['N'], *cells, 'A/cudnn %.3f' % st.median([m/a for m, a in zip(ra['A'], ra['cudnn'])]), r['ok'])
PY
for X in A Wb Wf; do echo "== plus1 $X"; grep -E "^\|" $R/plus1_$X.txt | tail -5; done
tar czf $OUT/run131.tgz -C /tmp run131
