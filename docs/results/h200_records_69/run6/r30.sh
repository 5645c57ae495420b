#!/usr/bin/env bash
# Trial (not kept): 64-row blocks at d = 128 three an SM (tiles of 32 keys, 3 stages, 64 KiB, launch bounds 3) against rung 69; two processes, 5 rounds.
set -uo pipefail
R=$OUT; mkdir -p $R/t $R/j
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
cp -r build-carry/tried/70_trial_rows_three kernels/
t0=$(date +%s)
( cmake -S . -B build -G Ninja -DFL_KERNELS="69;70" -DFL_BUILD_BENCH=OFF -DFL_BUILD_TESTS=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && { grep -E "error" $R/t/build.log | head; tail -5 $R/t/build.log; exit 1; }
L=$PWD/build/libflash_ladder.so; export FLASH_LADDER_LIB=$L
B="python3 scripts/decode_bench.py --lib $L --graphs --kernels 69,70 --d 128 --heads 32/8 --nq 16 --rounds 5 --repeats 30"
for proc in a b; do
  ( timeout 150 $B --b 1,4,8,12,16 --nk 8192,32768 --out $R/j/${proc}1.json
    timeout 100 $B --b 20,24,48,64 --nk 8192 --out $R/j/${proc}2.json ) > $R/t/bench_$proc.txt 2>&1
  echo "bench $proc rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt
done
python3 build-carry/summ.py $R/j/a*.json $R/j/b*.json > $R/table.txt
grep -h -E "FAIL|exceeds|not ok|error" $R/t/bench_*.txt | head -5 >> $R/summary.txt
cd $R && tar czf runs.tar.gz t j && cd - > /dev/null
cat $R/summary.txt $R/table.txt
