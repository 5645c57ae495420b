#!/usr/bin/env bash
# The decode sweep with the best rung of compute capability 9.0 (rung 73, built alone:
# "best" takes it for every call) against SDPA flash and cuDNN and the read ceiling: GQA 32/8 and
# MHA 32/32, B = 1, 8, 64, Nk = 1024-131072, Nq = 1 and 16, d = 128, CUDA graphs.
set -uo pipefail
R=$OUT; mkdir -p $R/j $R/t
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
t0=$(date +%s)
( cmake -S . -B build -G Ninja -DFL_KERNELS="73" -DFL_BUILD_BENCH=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && { grep -E -B2 -A8 "error" $R/t/build.log | head -40; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $R/summary.txt
L=$PWD/build/libflash_ladder.so; export FLASH_LADDER_LIB=$L
b() { n=$1; s=$2; shift 2; PYTHONUNBUFFERED=1 timeout $s python3 scripts/decode_bench.py --lib $L --graphs --kernels best --rounds 3 --repeats 20 --out $R/j/$n.json "$@" > $R/t/$n.txt 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt; }
b gqa 260 --heads 32/8
b mha 260 --heads 32/32
python3 build-carry/summ.py $R/j/*.json > $R/table.txt
cd $R && tar czf runs.tar.gz t j && cd - > /dev/null
cat $R/summary.txt; cat $R/table.txt
