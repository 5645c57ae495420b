#!/usr/bin/env bash
# The paged one-row cell: rung 73 beside probe 74 (the paged path with no table load, right only
# for pools in order), ragged lengths, pages of 64 and 256 shuffled and in order.
set -uo pipefail
R=$OUT; mkdir -p $R/j $R/t
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
python3 build-carry/make_probe_tablefree.py > $R/t/probe.txt 2>&1
t0=$(date +%s)
( cmake -S . -B build -G Ninja -DFL_KERNELS="73;74" -DFL_BUILD_BENCH=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && { grep -E -B2 -A8 "error" $R/t/build.log | head -40; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $R/summary.txt
L=$PWD/build/libflash_ladder.so; export FLASH_LADDER_LIB=$L
for i in 1 2; do
  PYTHONUNBUFFERED=1 timeout 200 python3 scripts/paged_bench.py --kernels 73,74 --nq 1 --d 128 --ragged --b 8 --nk 32768 --pages 64,256 --in-order --rounds 5 --out $R/j/paged$i.json > $R/t/paged$i.txt 2>&1
  echo "paged$i rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt
done
cd $R && tar czf runs.tar.gz t j && cd - > /dev/null
cat $R/summary.txt; for i in 1 2; do grep -v "^ *$" $R/t/paged$i.txt | tail -14; done
