#!/usr/bin/env bash
# Rung 73 (a grid of many-row blocks past the SMs runs unsplit) against rung 72: its tests, two
# processes of timings at d = 128 (16 query rows, B = 16-32) and 8 query rows, memcheck, racecheck.
set -uo pipefail
R=$OUT; mkdir -p $R/j $R/t
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
t0=$(date +%s)
( cmake -S . -B build -G Ninja -DFL_KERNELS="72;73" -DFL_BUILD_BENCH=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder test_paged test_decode test_gpu ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && { grep -E -B2 -A8 "error" $R/t/build.log | head -40; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $R/summary.txt
L=$PWD/build/libflash_ladder.so; export FLASH_LADDER_LIB=$L
t() { n=$1; s=$2; shift 2; timeout $s "$@" > $R/t/$n.txt 2>&1; echo "$n rc=$? $(grep -E '^\[  (PASSED|FAILED)' $R/t/$n.txt | tr '\n' ' ') $(( $(date +%s) - t0 )) s" >> $R/summary.txt; }
t paged73 150 ./build/tests/test_paged --gtest_filter='PagedSame.Rung73*'
b() { n=$1; shift; PYTHONUNBUFFERED=1 timeout 200 python3 scripts/decode_bench.py --lib $L --graphs --kernels 72,73 --d 128 --heads 32/8 --rounds 3 --repeats 20 --out $R/j/$n.json "$@" > $R/t/$n.txt 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt; }
b q16a --nq 16 --b 16,20,24,28,32 --nk 4096,8192,32768,131072
b q8 --nq 8 --b 20,24,28 --nk 8192,32768
t gpu 60 ./build/tests/test_gpu --gtest_filter='*k73_*'
t decode 120 ./build/tests/test_decode
( cd python/tests && timeout 120 python3 -m unittest -v test_kvcache_gpu ) > $R/t/kvcache.txt 2>&1
echo "kvcache rc=$? $(tail -1 $R/t/kvcache.txt) $(( $(date +%s) - t0 )) s" >> $R/summary.txt
for tool in memcheck racecheck; do
  timeout 60 compute-sanitizer --tool $tool --kernel-name kns=k73_ --error-exitcode 9 python3 scripts/sanitize_cache.py --kernel 73 --d 128 --nq 16 --pages 0,64 > $R/t/san_$tool.txt 2>&1
  echo "$tool rc=$? $(tail -2 $R/t/san_$tool.txt | tr '\n' ' ') $(( $(date +%s) - t0 )) s" >> $R/summary.txt
done
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,launch__grid_size,sm__cycles_active.avg
for bk in "20 8192" "24 32768"; do for rung in 72 73; do
  set -- $bk
  timeout 40 ncu --profile-from-start off --clock-control none -k regex:"decode_kernel|combine_kernel" --metrics $M \
    python3 build-carry/ncu_b.py 16 $rung 128 $1 $2 > $R/t/ncu_${1}_${2}_$rung.txt 2>&1
  echo "== B=$1 Nk=$2 rung $rung rc=$? $(( $(date +%s) - t0 )) s" >> $R/brief.txt
  grep -E "decode_kernel|combine_kernel|gpu__time|dram__|smsp__|sm__|launch__" $R/t/ncu_${1}_${2}_$rung.txt | cut -c1-110 >> $R/brief.txt
done; done
b q16b --nq 16 --b 20,24,28 --nk 4096,8192,32768,131072
python3 build-carry/summ.py $R/j/q*.json > $R/table.txt
cd $R && tar czf runs.tar.gz t j && cd - > /dev/null
cat $R/summary.txt; cat $R/brief.txt; cat $R/table.txt; grep -E "FAIL|ERROR" $R/t/kvcache.txt $R/t/paged73.txt | head
