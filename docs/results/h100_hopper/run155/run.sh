#!/usr/bin/env bash
# Device run 155: G (the launcher's grid: as few blocks as take the units in as many rounds as #SMs blocks would,
# e.g. 128 for 4096 units, where #SMs gives 31 whole rounds and one of 4 items; the kernel's code unchanged)
# against A (the tree), balanced, 12 rounds; G's rung 23 GPU tests first.
set -uo pipefail
R=/tmp/run155; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
cp build-carry/runDG.sh $R/run.sh; cp build-carry/v155/G.cu $R/
mk() { rm -rf /tmp/src$1; mkdir -p /tmp/src$1 && tar cf - --exclude=./build --exclude=./build-* . | tar xf - -C /tmp/src$1
  cp build-carry/v155/$1.cu /tmp/src$1/kernels/23_final_hopper/final_hopper.cu
  cmake -S /tmp/src$1 -B /tmp/src$1/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
  cmake --build /tmp/src$1/build -j 8 --target flash_ladder $2 > $R/build_$1.log 2>&1 || grep -E -A5 "error" $R/build_$1.log | head -30; }
mk A "" & mk G test_gpu &
wait
echo "builds $(( $(date +%s)-t0 )) s"
(cd /tmp/srcG && timeout 150 build/tests/test_gpu --gtest_filter='ShortTiles.Rung23*:*k23*:*23*' > $R/test_G.txt 2>&1; echo "tests G rc=$?"; grep -E "PASSED|FAILED|OK \]" $R/test_G.txt | head -14)
echo "tests $(( $(date +%s)-t0 )) s"
tar czf $OUT/run155.tgz -C /tmp run155
v() { left=$(( 585 - ($(date +%s)-t0) )); [ $left -lt 30 ] && { echo "$name skipped"; return; }
  timeout $left python3 build-carry/variants.py --order balanced --rounds 12 "$@" > $R/v_$name.txt 2>&1; echo "$name rc=$? $(( $(date +%s)-t0 )) s"
  tar czf $OUT/run155.tgz -C /tmp run155; }
L=A=/tmp/srcA/build/libflash_ladder.so,G=/tmp/srcG/build/libflash_ladder.so
name=d128 v --libs $L --d 128 --n 512,1024,2048,4096 --b 16 --out $R/v_d128.json
name=d128c v --libs $L --d 128 --causal --n 1024,2048,4096 --b 16 --out $R/v_d128c.json
name=d64 v --libs $L --d 64 --n 2048 --b 16 --out $R/v_d64.json
name=d64c v --libs $L --d 64 --causal --n 2048 --b 16 --out $R/v_d64c.json
name=d256 v --libs $L --d 256 --n 2048 --b 16 --out $R/v_d256.json
python3 - <<'PY'
import json, glob, statistics as st
med = lambda a, b: st.median([x / y for x, y in zip(a, b)])
for f in sorted(glob.glob('/tmp/run155/v_*.json')):
    for r in json.load(open(f)):
        ra = r['runs']
        print(f.split('/')[-1][2:-5], r['N'], 'G/A %.3f' % med(ra['G'], ra['A']), 'A/cudnn %.3f' % med(ra['A'], ra['cudnn']), 'G/cudnn %.3f' % med(ra['G'], ra['cudnn']), 'A %.1f G %.1f' % (r['tflops']['A'], r['tflops']['G']), r['ok'])
PY
tar czf $OUT/run155.tgz -C /tmp run155
