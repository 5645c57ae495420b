#!/usr/bin/env bash
# Device run 66: d = 128 with a taller query tile: T = 192 x 64 (three consumers, 160 registers),
# T3 = T with three K/V stages; against A (the tree), one process, 8 rounds; GPU tests on T, T3.
set -uo pipefail
R=/tmp/run66; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
for v in T T3; do
  mkdir -p /tmp/src$v && tar --exclude='./build*' -cf - . | tar -xf - -C /tmp/src$v
  (cd /tmp/src$v && patch -p1 -s < /work/main/docs/results/h100_hopper/run66/$v.patch) || echo "patch $v failed"  # as run: build-carry/t/$v.patch
done
build() {  # name srcdir kernels targets...
  local n=$1 src=$2 k=$3; shift 3
  cmake -S $src -B build-$n -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=$k" >/dev/null 2>&1 || { echo "cmake $n failed"; return 1; }
  cmake --build build-$n -j 5 --target "$@" >$R/build_$n.log 2>&1 || { grep -E -A5 "error" $R/build_$n.log | head -30; return 1; }
}
build A . "23" flash_ladder &
build T /tmp/srcT "16;23" flash_ladder test_gpu &
build T3 /tmp/srcT3 "16;23" flash_ladder test_gpu &
wait
echo "builds $(( $(date +%s)-t0 )) s"
for v in T T3; do
  timeout 60 ./build-$v/tests/test_gpu --gtest_filter='*23_final_hopper*:ShortTiles.*' >$R/gpu23_$v.log 2>&1; echo "gpu23 $v rc=$?"
  grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $R/gpu23_$v.log | head -5
done
V="python3 build-carry/variants.py --libs A=build-A/libflash_ladder.so,T=build-T/libflash_ladder.so,T3=build-T3/libflash_ladder.so --rounds 8"
timeout 120 $V --d 128 --n 1024,2048,4096,8192 --out $R/variants_d128.json > $R/variants.txt 2>&1
timeout 50 $V --d 128 --n 4096 --causal --out $R/variants_d128c.json >> $R/variants.txt 2>&1
echo "total $(( $(date +%s)-t0 )) s"
grep "^d=\|rror" $R/variants.txt | head -20
python3 - <<'PY'
import json,statistics,glob
for f in sorted(glob.glob('/tmp/run66/variants_*.json')):
    for r in json.load(open(f)):
        a=r['runs']['A']; out=[]
        for v in ['T','T3','cudnn']:
            rat=[x/y for x,y in zip(r['runs'][v],a)][1:]
            out.append(f"{v}/A {statistics.median(rat):.3f} [{min(rat):.3f}-{max(rat):.3f}]")
        print(r['d'], r['N'], r['causal'], ' | '.join(out))
PY
tar czf $OUT/run66.tgz -C /tmp run66
