#!/usr/bin/env bash
# Device run 153: N + 1 taken apart by shape, no code changed: rung 23 (the tree) and cuDNN at d = 128 over
# (Nq, Nk) = (N, N), (N + 1, N), (N, N + 1), (N + 1, N + 1) for N = 2048 and 4096, and N = 2048 / 4096 at
# B = 16 / 32 / 8 (the items' count against their length), every shape of a group in every round, 12 rounds.
set -uo pipefail
R=/tmp/run153; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
cp build-carry/runDE.sh build-carry/shapes.py $R/
cmake -S . -B /tmp/bT -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
cmake --build /tmp/bT -j 16 --target flash_ladder > $R/build.log 2>&1 || { grep -E -A5 "error" $R/build.log | head -30; exit 1; }
echo "build $(( $(date +%s)-t0 )) s"
s() { left=$(( 585 - ($(date +%s)-t0) )); [ $left -lt 30 ] && { echo "$name skipped"; return; }
  timeout $left python3 build-carry/shapes.py --lib /tmp/bT/libflash_ladder.so --rounds 12 "$@" > $R/s_$name.txt 2>&1; echo "$name rc=$? $(( $(date +%s)-t0 )) s"
  tar czf $OUT/run153.tgz -C /tmp run153; }
name=p2048 s --d 128 --shapes 16x2048x2048,16x2049x2048,16x2048x2049,16x2049x2049 --out $R/s_p2048.json
name=p4096 s --d 128 --shapes 16x4096x4096,16x4097x4096,16x4096x4097,16x4097x4097 --out $R/s_p4096.json
name=len s --d 128 --shapes 16x2048x2048,32x2048x2048,8x4096x4096,16x4096x4096 --out $R/s_len.json
for f in p2048 p4096 len; do echo "== $f"; grep -E "^d=|err" $R/s_$f.txt | sed 's/d=128 //'; done
tar czf $OUT/run153.tgz -C /tmp run153
