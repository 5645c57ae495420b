#!/usr/bin/env bash
# Device run 154: the tree (rung 23) against cuDNN and FA2 at the targets' shapes, 16 rounds in variants.py's
# balanced order (the sweep gives 5): d = 128 N = 512-16384 non-causal and causal, d = 64 causal 2048 / 4096.
set -uo pipefail
R=/tmp/run154; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
cp build-carry/runDF.sh $R/run.sh
cmake -S . -B /tmp/bT -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
cmake --build /tmp/bT -j 16 --target flash_ladder > $R/build.log 2>&1 || { grep -E -A5 "error" $R/build.log | head -30; exit 1; }
echo "build $(( $(date +%s)-t0 )) s"
v() { left=$(( 585 - ($(date +%s)-t0) )); [ $left -lt 30 ] && { echo "$name skipped"; return; }
  timeout $left python3 build-carry/variants.py --order balanced --rounds 16 --libs A=/tmp/bT/libflash_ladder.so "$@" > $R/v_$name.txt 2>&1; echo "$name rc=$? $(( $(date +%s)-t0 )) s"
  tar czf $OUT/run154.tgz -C /tmp run154; }
name=d128 v --d 128 --n 512,1024,2048,4096,8192,16384 --out $R/v_d128.json
name=d128c v --d 128 --causal --n 512,1024,2048,4096,8192,16384 --out $R/v_d128c.json
name=d64c v --d 64 --causal --n 2048,4096 --out $R/v_d64c.json
python3 - <<'PY'
import json, glob, statistics as st
for f in sorted(glob.glob('/tmp/run154/v_*.json')):
    for r in json.load(open(f)):
        a, c, fa = r['runs']['A'], r['runs']['cudnn'], r['runs']['fa2']
        q = sorted(x / y for x, y in zip(a, c))
        print('d=%d N=%5d B=%2d %-6s A %6.1f cudnn %6.1f fa2 %6.1f | A/cudnn med %.3f (rounds %.3f-%.3f, quartiles %.3f-%.3f) A/fa2 %.3f ok %s' % (
            r['d'], r['N'], r['B'], 'causal' if r['causal'] else '', r['tflops']['A'], r['tflops']['cudnn'], r['tflops']['fa2'],
            st.median(q), q[0], q[-1], q[len(q) // 4], q[(3 * len(q)) // 4], st.median(x / y for x, y in zip(a, fa)), r['ok']))
PY
tar czf $OUT/run154.tgz -C /tmp run154
