#!/usr/bin/env bash
# Trials after rung 66 at d = 96: 67 (one slot an SM, ring 4), 68 (ring 3 too), 69 (count forced).
set -uo pipefail
R=$OUT; mkdir -p $R/j $R/t
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
t0=$(date +%s)
( cmake -S . -B build -G Ninja -DFL_KERNELS="66;67;68;69" -DFL_BUILD_BENCH=OFF -DFL_BUILD_TESTS=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder ) > $R/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" | tee -a $R/summary.txt; [ $rc -ne 0 ] && { grep -E -A5 "error" $R/build.log | head -30; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $R/summary.txt
L=$PWD/build/libflash_ladder.so
b() { n=$1; k=$2; shift 2; PYTHONUNBUFFERED=1 timeout 150 python3 scripts/decode_bench.py --lib $L --graphs --kernels $k --d 96 --rounds 3 --repeats 20 --out $R/j/$n.json "$@" > $R/t/$n.txt 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt; }
b g 66,67,68 --heads 32/8 --b 1,2,4,8,16 --nk 2048,8192,32768,131072 --nq 1
b m 66,67,68 --heads 32/32 --b 1,2,4 --nk 8192,32768,131072 --nq 1,16
for s in 8 12 15 20; do FL_TRIAL_SPLITS=$s b f1_s$s 66,69 --heads 32/8 --b 1 --nk 8192,32768 --nq 1; done
for s in 15 29; do FL_TRIAL_ALONE=1 FL_TRIAL_SPLITS=$s b f1_s${s}_alone 66,69 --heads 32/8 --b 1 --nk 8192,32768 --nq 1; done
for s in 2 3 6 8; do FL_TRIAL_SPLITS=$s b f8_s$s 66,69 --heads 32/8 --b 8 --nk 32768 --nq 1; done
FL_TRIAL_ALONE=1 FL_TRIAL_SPLITS=4 b f8_s4_alone 66,69 --heads 32/8 --b 8 --nk 32768 --nq 1
python3 build-carry/summ.py $R/j/*.json > $R/table.txt
cd $R && tar czf runs.tar.gz t j build.log && rm -rf t j build.log && cd - > /dev/null
cat $R/summary.txt; cat $R/table.txt
