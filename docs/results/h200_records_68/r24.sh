#!/usr/bin/env bash
# Trial again (64-row blocks at two an SM, d = 128): the short calls where the count doubles, two processes, 5 rounds.
set -uo pipefail
R=$OUT; mkdir -p $R/t $R/j
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
t0=$(date +%s)
( cmake -S . -B build -G Ninja -DFL_KERNELS="68;69" -DFL_BUILD_BENCH=OFF -DFL_BUILD_TESTS=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && { grep -E "error" $R/t/build.log | head; exit 1; }
L=$PWD/build/libflash_ladder.so; export FLASH_LADDER_LIB=$L
for proc in a b; do
  PYTHONUNBUFFERED=1 timeout 100 python3 scripts/decode_bench.py --lib $L --graphs --kernels 68,69 --d 128 --heads 32/8 --b 1,2,4 --nk 4096,8192,16384 --nq 16 --rounds 5 --repeats 20 --out $R/j/short_$proc.json > $R/t/short_$proc.txt 2>&1
  echo "bench $proc rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt
done
python3 build-carry/summ.py $R/j/short_a.json $R/j/short_b.json > $R/table.txt
cd $R && tar czf runs.tar.gz t j && rm -rf t j && cd - > /dev/null
cat $R/summary.txt $R/table.txt
