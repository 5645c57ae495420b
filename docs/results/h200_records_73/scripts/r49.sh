#!/usr/bin/env bash
# Probes on rung 72: 73/74 one-split grids past the SMs (d = 128, 16 query rows, B = 20-28);
# 75 the block table held 32 entries a warp (one query row, paged).
set -uo pipefail
R=$OUT; mkdir -p $R/j $R/t
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
cp -r build-carry/tried/73_trial_one_split_two build-carry/tried/74_trial_two_splits_two build-carry/tried/75_trial_table_shfl kernels/
t0=$(date +%s)
( cmake -S . -B build -G Ninja -DFL_KERNELS="72;73;74;75" -DFL_BUILD_BENCH=OFF -DFL_BUILD_TESTS=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && { grep -E -B2 -A8 "error" $R/t/build.log | head -40; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $R/summary.txt
L=$PWD/build/libflash_ladder.so; export FLASH_LADDER_LIB=$L
PYTHONUNBUFFERED=1 timeout 150 python3 scripts/decode_bench.py --lib $L --graphs --kernels 72,73,74 --d 128 --heads 32/8 --nq 16 --b 20,24,28 --nk 8192,32768 --rounds 3 --repeats 20 --out $R/j/q128.json > $R/t/q128.txt 2>&1
echo "q128 rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt
PYTHONUNBUFFERED=1 timeout 200 python3 scripts/paged_bench.py --kernels 72,75 --nq 1 --d 128 --ragged --b 1,8 --nk 32768,131072 --pages 64,256 --in-order --rounds 3 --out $R/j/paged.json > $R/t/paged.txt 2>&1
echo "paged rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt
python3 build-carry/summ.py $R/j/q128.json > $R/table.txt
cd $R && tar czf runs.tar.gz t j && cd - > /dev/null
cat $R/summary.txt; cat $R/table.txt; grep -v "^ *$" $R/t/paged.txt | tail -45
