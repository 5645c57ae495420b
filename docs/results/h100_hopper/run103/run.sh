#!/usr/bin/env bash
# Device run 103: run 102's d = 128, N = 512 cell again (cuDNN ran 82-131 us in its five rounds, 72 in run 81): rungs
# 16-23, FlashAttention-2 and cuDNN, compare_sdpa --rounds 5 --n 512, merged into run 102's file.
set -uo pipefail
R=/tmp/run103; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=16;17;18;19;20;21;22;23" >/dev/null 2>&1 || exit 1
cmake --build build -j 16 --target flash_ladder ladder >$R/build.log 2>&1 || { grep -E -A5 "error" $R/build.log | head -40; exit 1; }
echo "build $(( $(date +%s)-t0 )) s"
cp build-carry/runBG.sh $R/run.sh
J=$R/h100_final_hopper_sdpa.json
cp build-carry/run102_sdpa.json $J
python3 scripts/compare_sdpa.py --repeats 15 --rounds 5 --kernels 16,17,18,19,20,21,22,23 --out $J --merge --n 512 > $R/d128_512.txt 2>&1; echo "rc=$? $(( $(date +%s)-t0 )) s"
tar czf $OUT/run103.tgz -C /tmp run103
python3 - <<'PY'
import json
d = json.load(open('/tmp/run103/h100_final_hopper_sdpa.json'))
for r in d['rows']:
    if r['d'] == 128 and r['N'] == 512 and not r['causal'] and r['dtype'] == 'fp16' and r['impl'] in ('23_final_hopper', 'sdpa_cudnn', 'sdpa_flash'):
        print(r['impl'], round(r['ms'] * 1000, 1), [round(x * 1000, 1) for x in r['round_ms']])
PY
