#!/usr/bin/env bash
# Device run 111: D (the tree), the rest of the sweep: d = 64 and d = 256 series (rungs 16-23, FlashAttention-2, cuDNN,
# compare_sdpa --rounds 5), merged into run 110's file; GQA (gqa_bench, three times); N + 1 (plus1_bench, run 80's command).
set -uo pipefail
R=/tmp/run111; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
cp build-carry/runBO.sh $R/run.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=16;17;18;19;20;21;22;23" >/dev/null 2>&1 || exit 1
cmake --build build -j 16 --target flash_ladder ladder >$R/build.log 2>&1 || { grep -E -A5 "error" $R/build.log | head -40; exit 1; }
echo "build $(( $(date +%s)-t0 )) s"
J=$R/h100_final_hopper_sdpa.json
cp build-carry/run110_sdpa.json $J
C="python3 scripts/compare_sdpa.py --repeats 15 --rounds 5 --kernels 16,17,18,19,20,21,22,23 --out $J --merge"
s() { name=$1; shift; left=$(( 590 - ($(date +%s)-t0) )); [ $left -lt 60 ] && { echo "$name skipped"; return; }
  timeout $left $C "$@" > $R/$name.txt 2>&1; echo "$name rc=$? $(( $(date +%s)-t0 )) s"; tar czf $OUT/run111.tgz -C /tmp run111; }
s d64c --d 64 --causal
s d64 --d 64
s d256 --d 256 --n 512,1024,2048,4096,8192
s d256c --d 256 --n 512,1024,2048,4096,8192 --causal
for g in 1 2 3; do left=$(( 585 - ($(date +%s)-t0) )); [ $left -lt 20 ] && break
  timeout $left python3 scripts/gqa_bench.py --kernels 16,23 --out $R/gqa$g.json > $R/gqa$g.txt 2>&1; echo "gqa$g rc=$? $(( $(date +%s)-t0 )) s"; done
tar czf $OUT/run111.tgz -C /tmp run111
left=$(( 585 - ($(date +%s)-t0) ))
[ $left -gt 40 ] && { timeout $left python3 scripts/plus1_bench.py --kernel 23 --pairs 16:2048,16:4096 --causal-pairs 16:2048,16:4096 --rounds 4 --repeats 15 --out $R/plus1.json > $R/plus1.txt 2>&1; echo "plus1 rc=$? $(( $(date +%s)-t0 )) s"; tail -7 $R/plus1.txt; }
tar czf $OUT/run111.tgz -C /tmp run111
python3 - <<'PY'
import json
d = json.load(open('/tmp/run111/h100_final_hopper_sdpa.json'))
t = {}
for r in d['rows']:
    if r['dtype'] == 'fp16': t[(r['d'], r['causal'], r['N'], r['impl'])] = r['tflops']
for (dd, c) in ((128, False), (128, True), (64, False), (64, True), (256, False), (256, True)):
    print(dd, 'causal' if c else '', ' '.join('%d:%.3f' % (n, t[(dd, c, n, '23_final_hopper')] / t[(dd, c, n, 'sdpa_cudnn')]) for n in sorted({k[2] for k in t if k[0] == dd and k[1] == c})))
PY
for f in gqa1 gqa2 gqa3; do grep -E "^==|23_final|sdpa_cudnn" $R/$f.txt 2>/dev/null; done
