#!/usr/bin/env bash
# The 64-row d = 96 call outside a graph: eager timings of rungs 67 and 68, and Nsight Compute with the caches left warm.
set -uo pipefail
R=$OUT; mkdir -p $R/j $R/t
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
t0=$(date +%s)
( cmake -S . -B build -G Ninja -DFL_KERNELS="67;68" -DFL_BUILD_BENCH=OFF -DFL_BUILD_TESTS=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && exit 1
L=$PWD/build/libflash_ladder.so; export FLASH_LADDER_LIB=$L
PYTHONUNBUFFERED=1 timeout 60 python3 scripts/decode_bench.py --lib $L --kernels 67,68 --d 96 --heads 32/8 --b 8 --nk 8192 --nq 16 --rounds 9 --repeats 30 --out $R/j/eager.json > $R/t/eager.txt 2>&1
echo "eager rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt
for k in 67 68; do
  timeout 60 ncu --profile-from-start off --clock-control none --cache-control none -k regex:"decode_kernel|combine_kernel" \
    --section SpeedOfLight --metrics smsp__inst_executed.sum python3 build-carry/ncu_q16.py $k > $R/t/ncu_warm_$k.txt 2>&1
  echo "ncu warm $k rc=$? $(( $(date +%s) - t0 )) s: $(grep -E 'Duration' $R/t/ncu_warm_$k.txt | tr -s ' ' | tr '\n' ' ')" >> $R/summary.txt
done
python3 build-carry/summ.py $R/j/*.json > $R/table.txt
cd $R && tar czf runs.tar.gz t j && rm -rf t j && cd - > /dev/null
cat $R/summary.txt; cat $R/table.txt
