#!/usr/bin/env bash
# Device run 68: F = the tree (two Q stages + an item's last P·V fused with the next item's first S), Q2 = two Q stages only, A = f5ff6d6

set -uo pipefail
R=/tmp/run68; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
mkdir -p /tmp/srcA && tar --exclude='./build*' -cf - . | tar -xf - -C /tmp/srcA
cp build-carry/base23_f5ff6d6.cu /tmp/srcA/kernels/23_final_hopper/final_hopper.cu
cp build-carry/schedule_f5ff6d6.cuh /tmp/srcA/kernels/23_final_hopper/schedule.cuh
mkdir -p /tmp/srcQ2 && tar --exclude='./build*' -cf - . | tar -xf - -C /tmp/srcQ2
cp build-carry/q2.cu /tmp/srcQ2/kernels/23_final_hopper/final_hopper.cu
build() {  # name srcdir kernels targets...
  local n=$1 src=$2 k=$3; shift 3
  cmake -S $src -B build-$n -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=$k" >/dev/null 2>&1 || { echo "cmake $n failed"; return 1; }
  cmake --build build-$n -j 8 --target "$@" >$R/build_$n.log 2>&1 || { grep -E -A5 "error" $R/build_$n.log | head -30; return 1; }
}
build F . "16;23" flash_ladder test_gpu &
build Q2 /tmp/srcQ2 "23" flash_ladder &
build A /tmp/srcA "23" flash_ladder &
wait
echo "builds $(( $(date +%s)-t0 )) s"
timeout 90 ./build-F/tests/test_gpu --gtest_filter='*23_final_hopper*:ShortTiles.*' >$R/gpu23_F.log 2>&1; echo "gpu23 F rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $R/gpu23_F.log | head -5
V="python3 build-carry/variants.py --libs A=build-A/libflash_ladder.so,Q2=build-Q2/libflash_ladder.so,F=build-F/libflash_ladder.so --rounds 8"
timeout 150 $V --d 128 --n 1024,512,2048,4096,8192 --out $R/variants_d128.json > $R/variants.txt 2>&1
timeout 60 $V --d 128 --n 1024,4096 --causal --out $R/variants_d128c.json >> $R/variants.txt 2>&1
timeout 80 $V --d 64 --n 1024,512,2048,8192 --out $R/variants_d64.json >> $R/variants.txt 2>&1
echo "total $(( $(date +%s)-t0 )) s"
grep "^d=\|rror" $R/variants.txt | head -20
python3 - <<'PY'
import json,statistics,glob
for f in sorted(glob.glob('/tmp/run68/variants_*.json')):
    for r in json.load(open(f)):
        a=r['runs']['A']; out=[]
        for v in ['Q2','F','cudnn']:
            rat=[x/y for x,y in zip(r['runs'][v],a)][1:]
            out.append(f"{v}/A {statistics.median(rat):.3f} [{min(rat):.3f}-{max(rat):.3f}]")
        print(r['d'], r['N'], r['causal'], ' | '.join(out))
PY
tar czf $OUT/run68.tgz -C /tmp run68
