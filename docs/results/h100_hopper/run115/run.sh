#!/usr/bin/env bash
# Device run 115: what the idle at short lengths is. Rung 23 (HEAD) against diagnostic builds of it that compute wrong
# results on purpose (build-carry/v113/diag_final_hopper.cu, one macro each): L no K/V load after a stage's first,
# Q no Q load after the first two items, O no O store, E no exponential. d = 128, B = 16, N = 512, 1024, 4096.
set -uo pipefail
R=/tmp/run115; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
cp build-carry/runBS.sh $R/run.sh; cp build-carry/v113/diag_final_hopper.cu $R/
mk() { # name macro
  rm -rf /tmp/d$1; mkdir -p /tmp/d$1 && tar cf - --exclude=./build --exclude=./build-* . | tar xf - -C /tmp/d$1
  [ -n "$2" ] && cp build-carry/v113/diag_final_hopper.cu /tmp/d$1/kernels/23_final_hopper/final_hopper.cu
  cmake -S /tmp/d$1 -B /tmp/d$1/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" \
    ${2:+"-DCMAKE_CUDA_FLAGS=-D$2"} >/dev/null 2>&1
  cmake --build /tmp/d$1/build -j 3 --target flash_ladder > $R/build_$1.log 2>&1 || tail -20 $R/build_$1.log; }
mk A "" & mk L FL_VAR_L & mk Q FL_VAR_Q & mk O FL_VAR_O & mk E FL_VAR_E &
wait
echo "builds $(( $(date +%s)-t0 )) s"
L=A=/tmp/dA/build/libflash_ladder.so,L=/tmp/dL/build/libflash_ladder.so,Q=/tmp/dQ/build/libflash_ladder.so,O=/tmp/dO/build/libflash_ladder.so,E=/tmp/dE/build/libflash_ladder.so
timeout 400 python3 build-carry/variants.py --libs $L --rounds 6 --d 128 --n 512,1024,4096 --b 16 --out $R/v_d128.json > $R/v_d128.txt 2>&1
echo "v rc=$? $(( $(date +%s)-t0 )) s"
tar czf $OUT/run115.tgz -C /tmp run115
python3 - <<'PY'
import json, statistics as st
for r in json.load(open('/tmp/run115/v_d128.json')):
    ra = r['runs']
    print(r['N'], 'A %.0f cudnn %.0f' % (r['tflops']['A'], r['tflops']['cudnn']), ' '.join('%s/A %.3f' % (n, st.median([m/a for m, a in zip(ra[n], ra['A'])])) for n in 'LQOE'), r['ok'])
PY
