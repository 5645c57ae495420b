#!/usr/bin/env bash
# Device run 76: rung 23 with units (causal pairs) against the kernel before (a snake of items):
# GPU tests of rung 23 on the new build; both timed in one process with cuDNN and FA2, alternating rounds.
set -uo pipefail
R=/tmp/run76; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
mkdir -p /tmp/basesrc && tar cf - --exclude=./build --exclude=./build-* . | tar xf - -C /tmp/basesrc
cp build-carry/base_snake/schedule.cuh build-carry/base_snake/final_hopper.cu /tmp/basesrc/kernels/23_final_hopper/
build() {  # dir src targets...
  local b=$1 src=$2; shift 2
  cmake -S $src -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1 || { echo "cmake $b failed"; return 1; }
  cmake --build $b -j 8 --target "$@" > $R/build_$(basename $b).log 2>&1 || { grep -E -A5 "error" $R/build_$(basename $b).log | head -30; return 1; }
}
build $PWD/build-pairs . flash_ladder test_gpu test_cpu &
build /tmp/basesrc/build-base /tmp/basesrc flash_ladder &
wait
echo "builds $(( $(date +%s)-t0 )) s"
./build-pairs/tests/test_cpu --gtest_filter='Schedule23*' > $R/cpu.log 2>&1; echo "cpu rc=$?"
timeout 150 ./build-pairs/tests/test_gpu --gtest_filter='*23_final_hopper*:ShortTiles.*:*Rung23*' > $R/gpu23.log 2>&1; echo "gpu23 rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]|tests ran" $R/gpu23.log | head
echo "t $(( $(date +%s)-t0 )) s"
V="python3 build-carry/variants.py --libs A=/tmp/basesrc/build-base/libflash_ladder.so,U=build-pairs/libflash_ladder.so --rounds 4"
timeout 120 $V --d 64 --causal --n 1024,2048,4096,8192,16384 --out $R/v.json > $R/v_d64c.txt 2>&1; echo "d64c rc=$?"
tar czf $OUT/run76.tgz -C /tmp run76
timeout 100 $V --d 128 --causal --n 1024,2048,4096,8192,16384 --out $R/v.json > $R/v_d128c.txt 2>&1; echo "d128c rc=$?"
timeout 80 $V --d 256 --causal --n 1024,2048,4096,8192 --out $R/v.json > $R/v_d256c.txt 2>&1; echo "d256c rc=$?"
tar czf $OUT/run76.tgz -C /tmp run76
timeout 60 $V --d 128 --causal --b 1 --n 8192,16384 --out $R/v.json > $R/v_b1.txt 2>&1; echo "b1 rc=$?"
timeout 60 $V --d 128 --n 4096,8192 --out $R/v.json > $R/v_d128.txt 2>&1; echo "d128 rc=$?"
echo "total $(( $(date +%s)-t0 )) s"
cp build-carry/runAF.sh build-carry/variants.py $R/
tar czf $OUT/run76.tgz -C /tmp run76
cat $R/v_*.txt | grep "^d="
