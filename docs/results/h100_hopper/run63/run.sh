#!/usr/bin/env bash
# Device run 63: rung 23 with clusters of two and K/V multicast (M, the tree) against f5ff6d6 (A):
# rung 23's GPU tests and ShortTiles; A/M in one process, 8 rounds, d = 128 / 64 / 256.
set -uo pipefail
R=/tmp/run63; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
mkdir -p /tmp/srcA && tar --exclude='./build*' -cf - . | tar -xf - -C /tmp/srcA
cp build-carry/base23_f5ff6d6.cu /tmp/srcA/kernels/23_final_hopper/final_hopper.cu
cp build-carry/schedule_f5ff6d6.cuh /tmp/srcA/kernels/23_final_hopper/schedule.cuh
build() {  # name srcdir kernels targets...
  local n=$1 src=$2 k=$3; shift 3
  cmake -S $src -B build-$n -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=$k" >/dev/null 2>&1 || { echo "cmake $n failed"; return 1; }
  cmake --build build-$n -j 8 --target "$@" >$R/build_$n.log 2>&1 || { grep -E -A5 "error" $R/build_$n.log | head -30; return 1; }
}
build M . "16;23" flash_ladder test_gpu ladder &
build A /tmp/srcA "23" flash_ladder &
wait
echo "builds $(( $(date +%s)-t0 )) s"
timeout 100 ./build-M/tests/test_gpu --gtest_filter='*23_final_hopper*:ShortTiles.*' >$R/gpu23.log 2>&1; rc=$?; echo "gpu23 rc=$rc"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]|Failure" $R/gpu23.log | head -20
tail -5 $R/gpu23.log
if [ $rc -eq 124 ]; then grep -E "^\[ RUN" $R/gpu23.log | tail -1; tar czf $OUT/run63.tgz -C /tmp run63; exit 1; fi
V="python3 build-carry/variants.py --libs A=build-A/libflash_ladder.so,M=build-M/libflash_ladder.so --rounds 8"
timeout 120 $V --d 128 --n 1024,2048,4096,8192 --out $R/variants_d128.json > $R/variants.txt 2>&1
timeout 60 $V --d 128 --n 4096 --causal --out $R/variants_d128c.json >> $R/variants.txt 2>&1
timeout 45 $V --d 64 --n 4096 --out $R/variants_d64.json >> $R/variants.txt 2>&1
timeout 45 $V --d 256 --n 4096 --out $R/variants_d256.json >> $R/variants.txt 2>&1
echo "total $(( $(date +%s)-t0 )) s"
grep "^d=\|rror" $R/variants.txt | head -20
python3 - <<'PY'
import json,statistics,glob
for f in sorted(glob.glob('/tmp/run63/variants_*.json')):
    for r in json.load(open(f)):
        a=r['runs']['A']; out=[]
        for v in ['M','cudnn']:
            rat=[x/y for x,y in zip(r['runs'][v],a)][1:]
            out.append(f"{v}/A {statistics.median(rat):.3f} [{min(rat):.3f}-{max(rat):.3f}]")
        print(r['d'], r['N'], r['causal'], ' | '.join(out))
PY
tar czf $OUT/run63.tgz -C /tmp run63
