#!/usr/bin/env bash
# Where the best rung stands on the H200: the package's K/V cache tests (rungs 39, 69, 70 built),
# then decode_bench of "best" with the peers at query lengths 1-16 (GQA 32/8, MHA), d = 96/128/192.
set -uo pipefail
R=$OUT; mkdir -p $R/t $R/j
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
t0=$(date +%s)
( cmake -S . -B build -G Ninja -DFL_KERNELS="39;69;70" -DFL_BUILD_BENCH=OFF -DFL_BUILD_TESTS=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && { tail -20 $R/t/build.log; exit 1; }
L=$PWD/build/libflash_ladder.so; export FLASH_LADDER_LIB=$L
( cd python/tests && timeout 150 python3 -m unittest -v test_kvcache_gpu ) > $R/t/kvcache.txt 2>&1
echo "kvcache rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > $R/t/gpu.txt
B="python3 scripts/decode_bench.py --lib $L --graphs --kernels 69,70 --rounds 3 --repeats 20"
timeout 200 $B --d 128 --heads 32/8 --nq 1,2,4,8,16 --b 1,8,32 --nk 8192,32768 --out $R/j/gqa128.json > $R/t/gqa128.txt 2>&1
echo "gqa128 rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt
timeout 90 $B --d 128 --heads 32/32 --nq 1,4,16 --b 1,8 --nk 8192,32768 --out $R/j/mha128.json > $R/t/mha128.txt 2>&1
echo "mha128 rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt
for d in 96 192 64; do
  timeout 70 $B --d $d --heads 32/8 --nq 1,4,16 --b 1,8 --nk 8192,32768 --out $R/j/gqa$d.json > $R/t/gqa$d.txt 2>&1
  echo "gqa$d rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt
done
cd $R && tar czf runs.tar.gz t j && cd - > /dev/null
cat $R/summary.txt; tail -4 $R/t/kvcache.txt
for f in gqa128 mha128 gqa96 gqa192 gqa64; do echo "== $f"; sed -n '/^GB.s of K/,$p' $R/t/$f.txt | cut -c1-130; done
