#!/usr/bin/env bash
# Trial after rung 67: the ring prologue in a rolled loop (68_trial_rolled_prologue) against rung 67.
set -uo pipefail
R=$OUT; mkdir -p $R/j $R/t
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
t0=$(date +%s)
( cmake -S . -B build -G Ninja -DFL_KERNELS="67;68" -DFL_BUILD_BENCH=OFF -DFL_BUILD_TESTS=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && { grep -A5 error $R/t/build.log | head; exit 1; }
L=$PWD/build/libflash_ladder.so
b() { n=$1; shift; PYTHONUNBUFFERED=1 timeout 120 python3 scripts/decode_bench.py --lib $L --graphs --kernels 67,68 --rounds 5 --repeats 20 --out $R/j/$n.json "$@" > $R/t/$n.txt 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt; }
b d96g --d 96 --heads 32/8 --b 1,8 --nk 1024,8192,32768 --nq 1
b d96m --d 96 --heads 32/32 --b 2 --nk 1024,8192 --nq 1
b d128 --d 128 --heads 32/8 --b 1,8 --nk 1024,8192 --nq 1
b d64 --d 64 --heads 32/8 --b 1 --nk 8192 --nq 1,16
python3 build-carry/summ.py $R/j/*.json > $R/table.txt
cd $R && tar czf runs.tar.gz t j && rm -rf t j && cd - > /dev/null
cat $R/summary.txt $R/table.txt
