#!/usr/bin/env bash
# The flush: rungs 67 and 68 and the peers, the rung-68 set, with --flush reads and --flush zeros (one process each); paged ragged.
set -uo pipefail
R=$OUT; mkdir -p $R/t $R/j
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
t0=$(date +%s)
( cmake -S . -B build -G Ninja -DFL_KERNELS="67;68" -DFL_BUILD_BENCH=OFF -DFL_BUILD_TESTS=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && { tail -30 $R/t/build.log; exit 1; }
L=$PWD/build/libflash_ladder.so; export FLASH_LADDER_LIB=$L
b() { n=$1; f=$2; d=$3; shift 3; PYTHONUNBUFFERED=1 timeout 120 python3 scripts/decode_bench.py --lib $L --graphs --flush $f --kernels 67,68 --d $d --rounds 5 --repeats 30 --out $R/j/${f}_$n.json "$@" > $R/t/${f}_$n.txt 2>&1; echo "$f $n rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt; }
for f in reads zeros; do
  b d96g $f 96 --heads 32/8 --b 1 --nk 1024,8192,32768,131072 --nq 1
  b d96g28 $f 96 --heads 32/8 --b 2,8 --nk 1024,32768 --nq 1
  b d96m $f 96 --heads 32/32 --b 1 --nk 1024,8192 --nq 1
  b d96q16 $f 96 --heads 32/8 --b 1,8 --nk 8192 --nq 16
  b d192g $f 192 --heads 32/8 --b 1,8 --nk 8192,32768 --nq 1
  b d192m $f 192 --heads 32/32 --b 1 --nk 8192 --nq 1
  b d128 $f 128 --heads 32/8 --b 1,8 --nk 8192 --nq 1
  b d64 $f 64 --heads 32/8 --b 1,8 --nk 8192 --nq 1
done
for f in reads zeros; do
  PYTHONUNBUFFERED=1 timeout 100 python3 scripts/paged_bench.py --flush $f --ragged --kernels 68 --b 1,8 --nk 32768 --pages 64,256 --in-order --rounds 5 --out $R/j/paged_$f.json > $R/t/paged_$f.txt 2>&1
  echo "paged $f rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt
done
python3 build-carry/summ.py $R/j/reads_*.json $R/j/zeros_*.json > $R/table.txt
for f in reads zeros; do tail -8 $R/t/paged_$f.txt >> $R/table.txt; done
cd $R && tar czf runs.tar.gz t j && rm -rf t && cd - > /dev/null
cat $R/summary.txt; cat $R/table.txt
