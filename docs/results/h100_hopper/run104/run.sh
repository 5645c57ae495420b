#!/usr/bin/env bash
# Device run 104: the current kernel (96baec1) re-measured where the targets cite old or disturbed figures, and the
# tail of the last round measured: GQA (gqa_bench, three times); d = 128 at N = 512/1024 and d = 256 causal at
# N = 2048/4096 against cuDNN (variants.py, 8 rounds); H = 32 against H = 33 (B = 16: 528 heads are 4 x 132, so every
# round of items is whole at H = 33; at H = 32 the last round is part-filled).
set -uo pipefail
R=/tmp/run104; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=16;23" >/dev/null 2>&1 || exit 1
cmake --build build -j 16 --target flash_ladder >$R/build.log 2>&1 || { grep -E -A5 "error" $R/build.log | head -40; exit 1; }
echo "build $(( $(date +%s)-t0 )) s"
cp build-carry/runBH.sh $R/run.sh; cp build-carry/variants.py $R/variants.py
V="python3 build-carry/variants.py --libs A=build/libflash_ladder.so --repeats 15"
for g in 1 2 3; do
  python3 scripts/gqa_bench.py --kernels 16,23 --out $R/gqa$g.json > $R/gqa$g.txt 2>&1; echo "gqa$g rc=$? $(( $(date +%s)-t0 )) s"
done
tar czf $OUT/run104.tgz -C /tmp run104
$V --n 512,1024,2048,4096 --h 32 --rounds 6 --out $R/h32.json > $R/h32.txt 2>&1; echo "h32 rc=$? $(( $(date +%s)-t0 )) s"
$V --n 512,1024,2048,4096 --h 33 --rounds 6 --out $R/h33.json > $R/h33.txt 2>&1; echo "h33 rc=$? $(( $(date +%s)-t0 )) s"
tar czf $OUT/run104.tgz -C /tmp run104
$V --n 512,1024 --rounds 8 --out $R/d128.json > $R/d128.txt 2>&1; echo "d128 rc=$? $(( $(date +%s)-t0 )) s"
$V --n 512,1024 --causal --rounds 8 --out $R/d128c.json > $R/d128c.txt 2>&1; echo "d128c rc=$? $(( $(date +%s)-t0 )) s"
$V --d 256 --causal --n 2048,4096 --rounds 8 --out $R/d256c.json > $R/d256c.txt 2>&1; echo "d256c rc=$? $(( $(date +%s)-t0 )) s"
tar czf $OUT/run104.tgz -C /tmp run104
for f in gqa1 gqa2 gqa3; do grep -E "^==|23_final|sdpa_cudnn" $R/$f.txt; done
for f in h32 h33 d128 d128c d256c; do echo "-- $f"; grep -E "^d=" $R/$f.txt; done
