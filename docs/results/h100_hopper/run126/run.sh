#!/usr/bin/env bash
# Device run 126: A against A2, a copy of the same library (the same file under another path, loaded apart), the two
# alone in one process, 16 rounds, on run 125's long cells: what variants.py reads when nothing differs.
set -uo pipefail
R=/tmp/run126; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
cp build-carry/runCD.sh $R/run.sh
[ -f build/build.ninja ] || cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
cmake --build build -j 16 --target flash_ladder > $R/build_A.log 2>&1 || tail -20 $R/build_A.log
mkdir -p /tmp/A2 && cp build/libflash_ladder.so /tmp/A2/ && cmp build/libflash_ladder.so /tmp/A2/libflash_ladder.so && echo "A2 is a byte copy of A"
echo "build $(( $(date +%s)-t0 )) s"
v() { left=$(( 580 - ($(date +%s)-t0) )); [ $left -lt 30 ] && { echo "$name skipped"; return; }
  timeout $left python3 build-carry/variants.py --rounds 16 "$@" > $R/v_$name.txt 2>&1; echo "$name rc=$? $(( $(date +%s)-t0 )) s"
  tar czf $OUT/run126.tgz -C /tmp run126; }
L=A=build/libflash_ladder.so,A2=/tmp/A2/libflash_ladder.so
name=d128c v --libs $L --d 128 --causal --n 4096 --b 16 --out $R/v_d128c.json
name=d256 v --libs $L --d 256 --n 2048 --b 16 --out $R/v_d256.json
name=d64 v --libs $L --d 64 --n 4096 --b 16 --out $R/v_d64.json
name=d128 v --libs $L --d 128 --n 512,4096 --b 16 --out $R/v_d128.json
python3 - <<'PY'
import json, glob, statistics as st
for f in sorted(glob.glob('/tmp/run126/v_*.json')):
    for r in json.load(open(f)):
        ra = r['runs']; x = [m/a for m, a in zip(ra['A2'], ra['A'])]
        print(f.split('/')[-1][2:-5], r['N'], 'A2/A %.3f' % st.median(x), 'A/cudnn %.3f A2/cudnn %.3f' % (st.median([m/a for m, a in zip(ra['A'], ra['cudnn'])]), st.median([m/a for m, a in zip(ra['A2'], ra['cudnn'])])), [round(y, 3) for y in x], r['ok'])
PY
tar czf $OUT/run126.tgz -C /tmp run126
