#!/usr/bin/env bash
# Rung 73 with its rule's last form (one split past the SMs only without cache lengths): its tests,
# the package's K/V cache tests, sanitizers on its calls, the plain calls timed again, and the
# ragged paged calls beside rung 72.
set -uo pipefail
R=$OUT; mkdir -p $R/j $R/t
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
t0=$(date +%s)
( cmake -S . -B build -G Ninja -DFL_KERNELS="39;72;73" -DFL_BUILD_BENCH=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder test_paged test_decode test_gpu ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && { grep -E -B2 -A8 "error" $R/t/build.log | head -40; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $R/summary.txt
L=$PWD/build/libflash_ladder.so; export FLASH_LADDER_LIB=$L
t() { n=$1; s=$2; shift 2; timeout $s "$@" > $R/t/$n.txt 2>&1; echo "$n rc=$? $(grep -E '^\[  (PASSED|FAILED)' $R/t/$n.txt | tr '\n' ' ') $(( $(date +%s) - t0 )) s" >> $R/summary.txt; }
t paged73 150 ./build/tests/test_paged --gtest_filter='PagedSame.Rung73*'
t decode 120 ./build/tests/test_decode
t gpu 60 ./build/tests/test_gpu --gtest_filter='*k73_*'
( cd python/tests && timeout 120 python3 -m unittest -v test_kvcache_gpu ) > $R/t/kvcache.txt 2>&1
echo "kvcache rc=$? $(tail -1 $R/t/kvcache.txt) $(( $(date +%s) - t0 )) s" >> $R/summary.txt
for tool in memcheck racecheck; do
  timeout 120 compute-sanitizer --tool $tool --kernel-name kns=k73_ --error-exitcode 9 python3 build-carry/sanitize73.py > $R/t/san73_$tool.txt 2>&1
  echo "$tool rc=$? $(tail -2 $R/t/san73_$tool.txt | tr '\n' ' ') $(( $(date +%s) - t0 )) s" >> $R/summary.txt
done
PYTHONUNBUFFERED=1 timeout 150 python3 scripts/decode_bench.py --lib $L --graphs --kernels 72,73 --d 128 --heads 32/8 --nq 16 --b 20,24,28 --nk 8192,32768 --rounds 3 --repeats 20 --out $R/j/q16c.json > $R/t/q16c.txt 2>&1
echo "q16c rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt
PYTHONUNBUFFERED=1 timeout 150 python3 scripts/paged_bench.py --kernels 72,73 --nq 16 --d 128 --ragged --b 20,24 --nk 32768 --pages 64,256 --rounds 3 --out $R/j/paged73b.json > $R/t/paged73b.txt 2>&1
echo "paged rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt
python3 build-carry/summ.py $R/j/q16c.json > $R/table.txt
cd $R && tar czf runs.tar.gz t j && cd - > /dev/null
cat $R/summary.txt; cat $R/table.txt; grep "max |" $R/t/san73_memcheck.txt; grep -v "^ *$" $R/t/paged73b.txt | tail -4
