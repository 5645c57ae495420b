#!/usr/bin/env bash
# Device run 61: rung 23 at d = 128: A = tree, Q = Q in registers, S = 3 K/V stages (O staged in
# sQ), H = every other K/V tile not loaded (diagnostic: half the L2 traffic).
set -uo pipefail
R=/tmp/run61; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
build() {  # name flags targets...
  local n=$1 f=$2; shift 2
  cmake -S . -B build-$n -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" "-DCMAKE_CUDA_FLAGS=$f" >/dev/null 2>&1 || { echo "cmake $n failed"; return 1; }
  cmake --build build-$n -j 4 --target "$@" >$R/build_$n.log 2>&1 || { grep -E -A5 "error" $R/build_$n.log | head -30; return 1; }
}
build A "" flash_ladder &
build Q "-DFL_V_QREG" flash_ladder &
build S "-DFL_V_S3" flash_ladder test_gpu &
build H "-DFL_V_HALF" flash_ladder &
wait
echo "builds $(( $(date +%s)-t0 )) s"
timeout 120 ./build-S/tests/test_gpu --gtest_filter='*23_final_hopper*:ShortTiles.*' >$R/gpu23_S.log 2>&1; echo "gpu23 S rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $R/gpu23_S.log | head -20
V="python3 build-carry/variants.py --libs A=build-A/libflash_ladder.so,Q=build-Q/libflash_ladder.so,S=build-S/libflash_ladder.so,H=build-H/libflash_ladder.so --rounds 8"
timeout 200 $V --d 128 --n 1024,2048,4096,8192 --out $R/variants_d128.json > $R/variants.txt 2>&1
timeout 80 $V --d 128 --n 4096 --causal --out $R/variants_d128c.json >> $R/variants.txt 2>&1
echo "total $(( $(date +%s)-t0 )) s"
grep "^d=" $R/variants.txt
python3 - <<'PY'
import json,statistics
for f in ['/tmp/run61/variants_d128.json','/tmp/run61/variants_d128c.json']:
    for r in json.load(open(f)):
        a=r['runs']['A']; out=[]
        for v in ['Q','S','H','cudnn']:
            rat=[x/y for x,y in zip(r['runs'][v],a)][1:]
            out.append(f"{v}/A {statistics.median(rat):.3f} [{min(rat):.3f}-{max(rat):.3f}]")
        print(r['N'], r['causal'], ' | '.join(out))
PY
tar czf $OUT/run61.tgz -C /tmp run61
