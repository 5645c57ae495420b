#!/usr/bin/env bash
# Trial after rung 68: the combine launched without programmatic serialization (no early launch), against 67 and 68.
set -uo pipefail
R=$OUT; mkdir -p $R/j $R/t
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
t0=$(date +%s)
( cmake -S . -B build -G Ninja -DFL_KERNELS="67;68;69" -DFL_BUILD_BENCH=OFF -DFL_BUILD_TESTS=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && { grep -E -B2 -A8 "error" $R/t/build.log | head -40; exit 1; }
L=$PWD/build/libflash_ladder.so
b() { n=$1; d=$2; shift 2; PYTHONUNBUFFERED=1 timeout 120 python3 scripts/decode_bench.py --lib $L --graphs --kernels 67,68,69 --d $d --rounds 9 --repeats 30 --out $R/j/$n.json "$@" > $R/t/$n.txt 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt; }
for p in a b; do
  b q96$p 96 --heads 32/8 --b 1,8 --nk 8192 --nq 16
  b g96$p 96 --heads 32/8 --b 1,8 --nk 1024,8192 --nq 1
done
python3 build-carry/summ.py $R/j/*.json > $R/table.txt
cd $R && tar czf runs.tar.gz t j && rm -rf t j && cd - > /dev/null
cat $R/summary.txt; cat $R/table.txt
