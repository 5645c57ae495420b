#!/usr/bin/env bash
# Call A: build 65;66 (lib, test_decode, test_paged, test_gpu), rung 66 against rung 65 on the calls its rule moves.
set -uo pipefail
R=$OUT; mkdir -p $R/j
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv | tee $R/gpu.txt
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
t0=$(date +%s)
( cmake -S . -B build -G Ninja -DFL_KERNELS="65;66" -DFL_BUILD_BENCH=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder test_paged test_decode test_gpu ) > $R/j/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" | tee -a $R/summary.txt
[ $rc -ne 0 ] && { grep -E -A6 "error|FAILED" $R/j/build.log | head -40; exit 1; }
L=$PWD/build/libflash_ladder.so
b() { n=$1; shift; PYTHONUNBUFFERED=1 timeout 120 python3 scripts/decode_bench.py --lib $L --graphs --kernels 65,66 --rounds 3 --repeats 20 --out $R/j/$n.json "$@" > $R/j/$n.txt 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 )) s" | tee -a $R/summary.txt; }
t0=$(date +%s)
b d64g --d 64 --heads 32/8 --b 5,8,9 --nk 2048,4096 --nq 1
b d64m --d 64 --heads 32/32 --b 2 --nk 2048,4096 --nq 1,16
b d96g --d 96 --heads 32/8 --b 5,8,12,16,24 --nk 1024,2048 --nq 1
b d96m --d 96 --heads 32/32 --b 2,4,6 --nk 1024,2048 --nq 1,16
b d128g --d 128 --heads 32/8 --b 5,8,9 --nk 1024,2048 --nq 1
b d128m --d 128 --heads 32/32 --b 2 --nk 1024,2048 --nq 1,16
b d192g --d 192 --heads 32/8 --b 5,8,12 --nk 768,1024 --nq 1
b d192m --d 192 --heads 32/32 --b 2,3 --nk 768,1024 --nq 1,16
b sweep8 --d 128 --heads 32/8,32/32 --b 8 --nk 1024,4096 --nq 1,16
for f in d64g d64m d96g d96m d128g d128m d192g d192m sweep8; do grep -A30 "^GB/s of K" $R/j/$f.txt | grep -E "^H="; done
tar czf $R/results.tar.gz -C $R j && rm -rf $R/j
cat $R/summary.txt
