#!/usr/bin/env bash
# The decode sweep with best on rung 74 (built with 73: best takes 74), then the paged one-row
# cells B = 1, 2, 4 with 32768 keys (rungs 73 and 74, two processes).
set -uo pipefail
R=$OUT; mkdir -p $R/j $R/t; t0=$(date +%s)
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
( cmake -S . -B build -G Ninja -DFL_KERNELS="73;74" -DFL_BUILD_BENCH=OFF -DFL_BUILD_TESTS=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && { tail -20 $R/t/build.log; exit 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader >> $R/summary.txt
L=$PWD/build/libflash_ladder.so; export FLASH_LADDER_LIB=$L
b() { n=$1; s=$2; shift 2; PYTHONUNBUFFERED=1 timeout $s python3 scripts/decode_bench.py --lib $L --graphs --kernels best --rounds 3 --repeats 20 --out $R/j/$n.json "$@" > $R/t/$n.txt 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt; }
b gqa 200 --heads 32/8
b mha 240 --heads 32/32
p() { n=$1; s=$2; shift 2; PYTHONUNBUFFERED=1 timeout $s python3 scripts/paged_bench.py --kernels 73,74 --nq 1 --d 128 --ragged --pages 64,256 --rounds 5 --out $R/j/$n.json "$@" > $R/t/$n.txt 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt; }
p paged1 110 --b 1,2,4 --nk 32768
el=$(( $(date +%s) - t0 )); [ $el -lt 470 ] && p paged2 $(( 580 - el )) --b 1,2,4 --nk 32768
python3 build-carry/summ.py $R/j/gqa.json $R/j/mha.json > $R/table.txt
cd $R && tar czf runs.tar.gz t j && cd - > /dev/null
cat $R/summary.txt; cat $R/table.txt | head -70; for n in paged1 paged2; do grep -E "^B=" $R/t/$n.txt 2>/dev/null; done
