#!/usr/bin/env bash
# Device run 98: the tree (rung 23: query tiles counted from the last row, the ragged first tile loaded from row 0 and
# stored through a map cut at its end; a narrow first visit of <= 16 keys with its own softmax): rung 23's GPU tests, compute-sanitizer on
# ShortTiles; variants.py A (HEAD 0ece2ba) vs N (the tree) on whole items and N + 1.
set -uo pipefail
R=/tmp/run98; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
cp build-carry/runBB.sh $R/run.sh
mkdir -p /tmp/srcA && tar cf - --exclude=./build --exclude=./build-* . | tar xf - -C /tmp/srcA
cp build-carry/base95/final_hopper.cu build-carry/base95/schedule.cuh /tmp/srcA/kernels/23_final_hopper/
( cmake -S /tmp/srcA -B /tmp/srcA/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
  cmake --build /tmp/srcA/build -j 6 --target flash_ladder > $R/build_A.log 2>&1 || tail -20 $R/build_A.log ) &
cmake -S . -B build-T -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
cmake --build build-T -j 10 --target test_gpu flash_ladder > $R/build_T.log 2>&1 || tail -20 $R/build_T.log
wait
echo "builds $(( $(date +%s)-t0 )) s"
F='ShortTiles.Rung23*:*k23*'
timeout 200 build-T/tests/test_gpu --gtest_filter="$F" > $R/T.txt 2>&1; echo "T rc=$?"; grep -E "^\[  (PASSED|FAILED)" $R/T.txt | head -12
timeout 200 compute-sanitizer --print-limit 5 build-T/tests/test_gpu --gtest_filter='ShortTiles.Rung23*' > $R/san_T.txt 2>&1; echo "san rc=$?"
grep -E "ERROR SUMMARY|PASSED|FAILED" $R/san_T.txt | head -5
tar czf $OUT/run98.tgz -C /tmp run98
LIBS=A=/tmp/srcA/build/libflash_ladder.so,N=build-T/libflash_ladder.so
v() { left=$(( 570 - ($(date +%s)-t0) )); [ $left -lt 30 ] && return
  timeout $left python3 build-carry/variants.py --libs $LIBS --rounds 6 "$@" > $R/v_$name.txt 2>&1; echo "$name rc=$? $(( $(date +%s)-t0 )) s"
  tar czf $OUT/run98.tgz -C /tmp run98; }
name=d128 v --d 128 --n 2048,2049,4096,4097,8192 --out $R/v_d128.json
name=d128c v --d 128 --causal --n 2048,2049,4096,4097 --out $R/v_d128c.json
name=d64c v --d 64 --causal --n 2048,2049,4096 --out $R/v_d64c.json
name=d256 v --d 256 --n 2048,4096 --out $R/v_d256.json
name=d128s v --d 128 --n 512,1024 --out $R/v_d128s.json
python3 - <<'PY'
import json, glob, statistics as st
for f in sorted(glob.glob('/tmp/run98/v_*.json')):
    for r in json.load(open(f)):
        ra = r['runs']
        print(f.split('/')[-1][2:-5], r['N'], 'A %.0f N %.0f' % (r['tflops']['A'], r['tflops']['N']), 'A/cudnn %.3f' % st.median([a/c for a, c in zip(ra['A'], ra['cudnn'])]), 'N/cudnn %.3f' % st.median([a/c for a, c in zip(ra['N'], ra['cudnn'])]),
              'N/A %.3f' % st.median([m/a for m, a in zip(ra['N'], ra['A'])]), ' '.join('%.3f' % (m/a) for m, a in zip(ra['N'], ra['A'])), r['ok'])
PY
