#!/usr/bin/env bash
# Rung 69 against rung 68 through a paged cache: 16 query rows, ragged lengths, pages of 64 and 256 shuffled (and in order), two processes.
set -uo pipefail
R=$OUT; mkdir -p $R/t $R/j
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
t0=$(date +%s)
( cmake -S . -B build -G Ninja -DFL_KERNELS="68;69" -DFL_BUILD_BENCH=OFF -DFL_BUILD_TESTS=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && { grep -E "error" $R/t/build.log | head; exit 1; }
export FLASH_LADDER_LIB=$PWD/build/libflash_ladder.so
for proc in a b; do
  timeout 200 python3 scripts/paged_bench.py --kernels 68,69 --nq 16 --ragged --b 4,8,12 --nk 32768 --pages 64,256 --in-order --rounds 5 --out $R/j/paged_$proc.json > $R/t/paged_$proc.txt 2>&1
  echo "paged $proc rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt
done
cd $R && tar czf runs.tar.gz t j && cd - > /dev/null
cat $R/summary.txt; for p in a b; do echo "== $p"; sed -n '/paged \/ contiguous\|GB\/s per arm/,$p' $R/t/paged_$p.txt | tail -30; done
