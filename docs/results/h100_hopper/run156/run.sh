#!/usr/bin/env bash
# Device run 156: a bound, no code changed, on the one idea left for N + 1 (a head's one-row query tile split between
# the two consumers, at about half an item, and spread evenly over the blocks). Its best case has the work of
# whole items in number 4096 + 256 / 2 = 4224 at N = 2049 (B = 8, H = 33, N = 2048: 264 heads x 16 items) and
# 8192 + 256 / 2 = 8320 at 4097 (B = 4, H = 65, N = 4096: 260 heads x 32), timed against N and N + 1 (B = 16,
# H = 16); the tree and cuDNN, d = 128, every shape in every round, 12 rounds.
set -uo pipefail
R=/tmp/run156; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
cp build-carry/runDH.sh $R/run.sh; cp build-carry/shapes.py $R/
cmake -S . -B /tmp/bT -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
cmake --build /tmp/bT -j 16 --target flash_ladder > $R/build.log 2>&1 || { grep -E -A5 "error" $R/build.log | head -30; exit 1; }
echo "build $(( $(date +%s)-t0 )) s"
s() { left=$(( 585 - ($(date +%s)-t0) )); [ $left -lt 30 ] && { echo "$name skipped"; return; }
  timeout $left python3 build-carry/shapes.py --lib /tmp/bT/libflash_ladder.so --rounds 12 "$@" > $R/s_$name.txt 2>&1; echo "$name rc=$? $(( $(date +%s)-t0 )) s"
  tar czf $OUT/run156.tgz -C /tmp run156; }
name=b2048 s --d 128 --shapes 16x16x2048x2048,8x33x2048x2048,16x16x2049x2049,16x16x2049x2048,16x16x2048x2049 --out $R/s_b2048.json
name=b4096 s --d 128 --shapes 16x16x4096x4096,4x65x4096x4096,16x16x4097x4097,16x16x4097x4096 --out $R/s_b4096.json
for f in b2048 b4096; do echo "== $f"; grep -E "^d=" $R/s_$f.txt | sed 's/d=128 //'; done
tar czf $OUT/run156.tgz -C /tmp run156
