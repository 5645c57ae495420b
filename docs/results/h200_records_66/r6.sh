#!/usr/bin/env bash
# Committed rung 66 (decode_half_grid) against rung 65: the calls it moves and grids past half; tests; sanitizers.
set -uo pipefail
R=$OUT; mkdir -p $R/j
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv | tee $R/gpu.txt
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
t0=$(date +%s)
( cmake -S . -B build -G Ninja -DFL_KERNELS="65;66" -DFL_BUILD_BENCH=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder test_paged test_decode test_gpu ) > $R/j/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" | tee -a $R/summary.txt
[ $rc -ne 0 ] && { grep -E -A6 "error|FAILED" $R/j/build.log | head -40; exit 1; }
L=$PWD/build/libflash_ladder.so
b() { n=$1; shift; PYTHONUNBUFFERED=1 timeout 100 python3 scripts/decode_bench.py --lib $L --graphs --kernels 65,66 --rounds 3 --repeats 20 --out $R/j/$n.json "$@" > $R/j/$n.txt 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 )) s" | tee -a $R/summary.txt; }
t0=$(date +%s)
b d64g --d 64 --heads 32/8 --b 5,8,9 --nk 2048,4096 --nq 1
b d64m --d 64 --heads 32/32 --b 2 --nk 2048,4096 --nq 1,16
b d96g --d 96 --heads 32/8 --b 5,8,12,16 --nk 1024,2048 --nq 1
b d96m --d 96 --heads 32/32 --b 2,4 --nk 1024,2048 --nq 1,16
b d128g --d 128 --heads 32/8 --b 5,8,9 --nk 1024,2048 --nq 1
b d128m --d 128 --heads 32/32 --b 2 --nk 1024,2048 --nq 1,16
b d192g --d 192 --heads 32/8 --b 5,8,12 --nk 768,1024 --nq 1
b d192m --d 192 --heads 32/32 --b 2,3 --nk 768,1024 --nq 1,16
t=$(date +%s)
timeout 150 ./build/tests/test_paged --gtest_filter='PagedSame.Rung66*:Cache/*' > $R/j/test_paged.log 2>&1; echo "test_paged rc=$? $(( $(date +%s) - t )) s: $(grep -E '^\[  (PASSED|FAILED) ' $R/j/test_paged.log | tr '\n' ' ')" | tee -a $R/summary.txt
grep -E "^\[  FAILED  \]|Failure|Expected|Which is|  Actual" $R/j/test_paged.log | head -20
t=$(date +%s)
timeout 90 ./build/tests/test_decode > $R/j/test_decode.log 2>&1; echo "test_decode rc=$? $(( $(date +%s) - t )) s: $(grep -E '^\[  (PASSED|FAILED) ' $R/j/test_decode.log | tr '\n' ' ')" | tee -a $R/summary.txt
grep -E "^\[  FAILED  \]|Failure" $R/j/test_decode.log | head -20
timeout 60 ./build/tests/test_gpu --gtest_filter='*k66_*' > $R/j/test_gpu.log 2>&1; echo "test_gpu k66 rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' $R/j/test_gpu.log | tr '\n' ' ')" | tee -a $R/summary.txt
export FLASH_LADDER_LIB=$L
for tool in memcheck racecheck; do for d in 128 96; do
  t=$(date +%s)
  SAN_D=$d SAN_PAGES=0,64,256 timeout 60 compute-sanitizer --tool $tool --kernel-name kns=k66_ --error-exitcode 9 python3 build-carry/san.py 66 > $R/j/${tool}_$d.log 2>&1
  echo "$tool 66 d=$d rc=$? $(( $(date +%s) - t )) s: $(grep -E 'san.py|SUMMARY' $R/j/${tool}_$d.log | tr '\n' ' ')" | tee -a $R/summary.txt
done; done
for f in d64g d64m d96g d96m d128g d128m d192g d192m; do grep -A30 "^GB/s of K" $R/j/$f.txt | grep -E "^H="; done
tar czf $R/results.tar.gz -C $R j && rm -rf $R/j
cat $R/summary.txt
