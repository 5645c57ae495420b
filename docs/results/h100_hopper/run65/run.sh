#!/usr/bin/env bash
# Device run 65: A = f5ff6d6 (the kernel before), H = A with every other K/V tile not loaded
# (diagnostic), M = the tree (clusters of two, K/V multicast); one process, 8 rounds.
set -uo pipefail
R=/tmp/run65; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
for v in A H; do
  mkdir -p /tmp/src$v && tar --exclude='./build*' -cf - . | tar -xf - -C /tmp/src$v
  cp build-carry/base23_f5ff6d6.cu /tmp/src$v/kernels/23_final_hopper/final_hopper.cu
  cp build-carry/schedule_f5ff6d6.cuh /tmp/src$v/kernels/23_final_hopper/schedule.cuh
done
(cd /tmp/srcH && patch -p1 < /work/main/docs/results/h100_hopper/run65/H.patch)  # as run: cp build-carry/h/final_hopper.cu
build() {  # name srcdir kernels targets...
  local n=$1 src=$2 k=$3; shift 3
  cmake -S $src -B build-$n -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=$k" >/dev/null 2>&1 || { echo "cmake $n failed"; return 1; }
  cmake --build build-$n -j 5 --target "$@" >$R/build_$n.log 2>&1 || { grep -E -A5 "error" $R/build_$n.log | head -30; return 1; }
}
build M . "23" flash_ladder &
build A /tmp/srcA "23" flash_ladder &
build H /tmp/srcH "23" flash_ladder &
wait
echo "builds $(( $(date +%s)-t0 )) s"
V="python3 build-carry/variants.py --libs A=build-A/libflash_ladder.so,H=build-H/libflash_ladder.so,M=build-M/libflash_ladder.so --rounds 8"
timeout 120 $V --d 128 --n 2048,4096,8192 --out $R/variants_d128.json > $R/variants.txt 2>&1
timeout 60 $V --d 128 --n 4096 --causal --out $R/variants_d128c.json >> $R/variants.txt 2>&1
echo "total $(( $(date +%s)-t0 )) s"
grep "^d=\|rror" $R/variants.txt | head -20
python3 - <<'PY'
import json,statistics,glob
for f in sorted(glob.glob('/tmp/run65/variants_*.json')):
    for r in json.load(open(f)):
        a=r['runs']['A']; out=[]
        for v in ['H','M','cudnn']:
            rat=[x/y for x,y in zip(r['runs'][v],a)][1:]
            out.append(f"{v}/A {statistics.median(rat):.3f} [{min(rat):.3f}-{max(rat):.3f}]")
        print(r['d'], r['N'], r['causal'], ' | '.join(out))
PY
tar czf $OUT/run65.tgz -C /tmp run65
