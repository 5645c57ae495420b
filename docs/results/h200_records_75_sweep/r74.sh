#!/usr/bin/env bash
# The decode sweep with best on rung 75 (built alone: best takes it for every call).
set -uo pipefail
R=$OUT; mkdir -p $R/j $R/t; t0=$(date +%s)
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
( cmake -S . -B build -G Ninja -DFL_KERNELS="75" -DFL_BUILD_BENCH=OFF -DFL_BUILD_TESTS=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && { tail -20 $R/t/build.log; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $R/summary.txt
L=$PWD/build/libflash_ladder.so; export FLASH_LADDER_LIB=$L
b() { n=$1; s=$2; shift 2; PYTHONUNBUFFERED=1 timeout $s python3 scripts/decode_bench.py --lib $L --graphs --kernels best --rounds 3 --repeats 20 --out $R/j/$n.json "$@" > $R/t/$n.txt 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt; }
b gqa 200 --heads 32/8
b mha 240 --heads 32/32
python3 build-carry/summ.py $R/j/gqa.json $R/j/mha.json > $R/table.txt
cd $R && tar czf runs.tar.gz t j && cd - > /dev/null
cat $R/summary.txt
