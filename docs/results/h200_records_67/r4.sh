#!/usr/bin/env bash
# Rung 67 against rung 66 again: the moved calls with the largest and most varying gains, 9 rounds, two processes each.
set -uo pipefail
R=$OUT; mkdir -p $R/j $R/t
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
t0=$(date +%s)
( cmake -S . -B build -G Ninja -DFL_KERNELS="66;67" -DFL_BUILD_BENCH=OFF -DFL_BUILD_TESTS=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && exit 1
L=$PWD/build/libflash_ladder.so
b() { n=$1; shift; PYTHONUNBUFFERED=1 timeout 200 python3 scripts/decode_bench.py --lib $L --graphs --kernels 66,67 --d 96 --rounds 9 --repeats 30 --out $R/j/$n.json "$@" > $R/t/$n.txt 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt; }
for p in a b; do
  b g1$p --heads 32/8 --b 1 --nk 8192,16384,32768,65536 --nq 1
  b g2$p --heads 32/8 --b 2,8 --nk 1024,4096 --nq 1
  b m$p --heads 32/32 --b 2 --nk 1024 --nq 1
done
python3 build-carry/summ.py $R/j/*.json > $R/table.txt
cd $R && tar czf runs.tar.gz t j && rm -rf t j && cd - > /dev/null
cat $R/summary.txt; cat $R/table.txt
