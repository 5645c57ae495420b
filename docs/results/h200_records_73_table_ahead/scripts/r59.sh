#!/usr/bin/env bash
# Trial 74: the block table's entry 32 ahead prefetched into the L1, beside rung 73, on the paged
# one-row cells (ragged lengths, pages of 64 and 256, shuffled and in order).
set -uo pipefail
R=$OUT; mkdir -p $R/j $R/t
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
python3 build-carry/make_trial_table_ahead.py > $R/t/trial.txt 2>&1
t0=$(date +%s)
( cmake -S . -B build -G Ninja -DFL_KERNELS="73;74" -DFL_BUILD_BENCH=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && { grep -E -B2 -A8 "error" $R/t/build.log | head -40; exit 1; }
export FLASH_LADDER_LIB=$PWD/build/libflash_ladder.so
p() { n=$1; shift; PYTHONUNBUFFERED=1 timeout 100 python3 scripts/paged_bench.py --kernels 73,74 --nq 1 --d 128 --ragged --pages 64,256 --in-order --rounds 5 --out $R/j/$n.json "$@" > $R/t/$n.txt 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt; }
p b8a --b 8 --nk 32768
p b8b --b 8 --nk 32768
p b1 --b 1 --nk 131072
cd $R && tar czf runs.tar.gz t j && cd - > /dev/null
cat $R/summary.txt; for n in b8a b8b b1; do grep -v "^ *$" $R/t/$n.txt | tail -3; done
