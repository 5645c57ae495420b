#!/usr/bin/env bash
# Device run 78: d = 64 with two consumers (Br = 128) on top of units (U2), against units (U) and the snake (A).
set -uo pipefail
R=/tmp/run78; mkdir -p $R
t0=$(date +%s)
mkdir -p /tmp/u2src && tar cf - --exclude=./build --exclude=./build-* . | tar xf - -C /tmp/u2src
sed -i 's/kConsumers = kHeadDim == 64 ? 3 : 2/kConsumers = 2/' /tmp/u2src/kernels/23_final_hopper/final_hopper.cu
grep -n "kConsumers = " /tmp/u2src/kernels/23_final_hopper/final_hopper.cu | head -2
if [ ! -f /tmp/basesrc/build-base/libflash_ladder.so ]; then
  mkdir -p /tmp/basesrc && tar cf - --exclude=./build --exclude=./build-* . | tar xf - -C /tmp/basesrc
  cp build-carry/base_snake/schedule.cuh build-carry/base_snake/final_hopper.cu /tmp/basesrc/kernels/23_final_hopper/
fi
for x in "build-pairs ." "/tmp/basesrc/build-base /tmp/basesrc" "/tmp/u2src/build-u2 /tmp/u2src"; do set -- $x
  [ -f $1/libflash_ladder.so ] && continue
  ( cmake -S $2 -B $1 -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1
    cmake --build $1 -j 8 --target flash_ladder > $R/build_$(basename $1).log 2>&1 || tail -20 $R/build_$(basename $1).log ) &
done; wait
echo "builds $(( $(date +%s)-t0 )) s"
V="python3 build-carry/variants.py --libs A=/tmp/basesrc/build-base/libflash_ladder.so,U=build-pairs/libflash_ladder.so,U2=/tmp/u2src/build-u2/libflash_ladder.so --rounds 4"
timeout 200 $V --d 64 --causal --n 1024,2048,4096,8192,16384 --out $R/v.json > $R/v_d64c.txt 2>&1; echo "d64c rc=$?"
tar czf $OUT/run78.tgz -C /tmp run78
timeout 120 $V --d 64 --n 1024,4096,16384 --out $R/v.json > $R/v_d64.txt 2>&1; echo "d64 rc=$?"
echo "total $(( $(date +%s)-t0 )) s"
cp build-carry/runAH.sh $R/
tar czf $OUT/run78.tgz -C /tmp run78
cat $R/v_*.txt | grep "^d="
