#!/usr/bin/env bash
# Rung 68 (d = 96 copies of eight whole rows) against rung 67: tests, sanitizer, timings at every d.
set -uo pipefail
R=$OUT; mkdir -p $R/j $R/t
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
t0=$(date +%s)
( cmake -S . -B build -G Ninja -DFL_KERNELS="67;68" -DFL_BUILD_BENCH=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder test_paged test_decode test_gpu ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && { grep -E -B2 -A8 "error" $R/t/build.log | head -40; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $R/summary.txt
L=$PWD/build/libflash_ladder.so; export FLASH_LADDER_LIB=$L
b() { n=$1; d=$2; shift 2; PYTHONUNBUFFERED=1 timeout 150 python3 scripts/decode_bench.py --lib $L --graphs --kernels 67,68 --d $d --rounds 5 --repeats 30 --out $R/j/$n.json "$@" > $R/t/$n.txt 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt; }
b g96 96 --heads 32/8 --b 1,2,8 --nk 1024,8192,32768 --nq 1
b m96 96 --heads 32/32 --b 1,2,8 --nk 1024,8192 --nq 1
b q96 96 --heads 32/8 --b 1,8 --nk 8192 --nq 16
b g128 128 --heads 32/8 --b 1,8 --nk 8192,32768 --nq 1
b g64 64 --heads 32/8 --b 1,8 --nk 8192,32768 --nq 1
b g192 192 --heads 32/8 --b 1,8 --nk 8192 --nq 1
python3 build-carry/summ.py $R/j/*.json > $R/table.txt
( timeout 200 ./build/tests/test_decode > $R/t/test_decode.txt 2>&1; echo "test_decode rc=$? $(tail -1 $R/t/test_decode.txt)" >> $R/summary.txt ) 
( timeout 150 ./build/tests/test_paged --gtest_filter='PagedSame.Rung6*:Cache/*' > $R/t/test_paged.txt 2>&1; echo "test_paged rc=$? $(tail -1 $R/t/test_paged.txt)" >> $R/summary.txt )
( timeout 100 ./build/tests/test_gpu --gtest_filter='*k68_*' > $R/t/test_gpu.txt 2>&1; echo "test_gpu rc=$? $(tail -1 $R/t/test_gpu.txt)" >> $R/summary.txt )
for tool in memcheck racecheck; do
  timeout 200 compute-sanitizer --tool $tool --kernel-name kns=k68_ --error-exitcode 9 python3 scripts/sanitize_cache.py --kernel 68 --d 64,96,128,192 --pages 0,16,64 > $R/t/san_$tool.txt 2>&1
  echo "sanitize $tool rc=$? $(tail -2 $R/t/san_$tool.txt | tr '\n' ' ')" >> $R/summary.txt
done
cd $R && tar czf runs.tar.gz t j && rm -rf t j && cd - > /dev/null
cat $R/summary.txt; cat $R/table.txt
