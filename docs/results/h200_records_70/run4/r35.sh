#!/usr/bin/env bash
# Rung 70: the second bench process (and B = 1, 2 with 131072 keys), then the paged cache against rung 69.
set -uo pipefail
R=$OUT; mkdir -p $R/t $R/j
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
t0=$(date +%s)
( cmake -S . -B build -G Ninja -DFL_KERNELS="69;70" -DFL_BUILD_BENCH=OFF -DFL_BUILD_TESTS=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && { grep -E "error" $R/t/build.log | head; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $R/summary.txt
L=$PWD/build/libflash_ladder.so; export FLASH_LADDER_LIB=$L
B="python3 scripts/decode_bench.py --lib $L --graphs --kernels 69,70 --heads 32/8 --nq 16 --rounds 5 --repeats 30"
timeout 100 $B --d 128 --b 1,4,8,12,16 --nk 8192,32768 --out $R/j/b1.json > $R/t/bench_b1.txt 2>&1; echo "b1 rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt
timeout 50 $B --d 128 --b 20,24,32,48,64 --nk 8192 --out $R/j/b2.json > $R/t/bench_b2.txt 2>&1; echo "b2 rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt
timeout 50 $B --d 64 --b 4,16,48 --nk 8192,32768 --out $R/j/b3.json > $R/t/bench_b3.txt 2>&1; echo "b3 rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt
timeout 40 $B --d 128 --b 1,2 --nk 131072 --out $R/j/b4.json > $R/t/bench_b4.txt 2>&1; echo "b4 rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt
timeout 150 python3 scripts/paged_bench.py --kernels 69,70 --nq 16 --ragged --b 4,8,12 --nk 32768 --pages 64,256 --rounds 5 --out $R/j/paged.json > $R/t/paged.txt 2>&1
echo "paged rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt
python3 build-carry/summ.py $R/j/b*.json > $R/table.txt
cd $R && tar czf runs.tar.gz t j && cd - > /dev/null
cat $R/summary.txt $R/table.txt; sed -n '/paged \/ contiguous\|GB\/s per arm/,$p' $R/t/paged.txt | tail -30
