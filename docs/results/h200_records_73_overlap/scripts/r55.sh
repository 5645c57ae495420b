#!/usr/bin/env bash
# Rung 74, last form (the overlap at d = 64 and 96 only): its bit-for-bit test, sanitizers,
# test_gpu, test_decode, the package's K/V cache tests, timings at d = 96 and 64 (16 and 8 query
# rows) against rung 73, Nsight Compute at d = 96.
set -uo pipefail
R=$OUT; mkdir -p $R/j $R/t
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
t0=$(date +%s)
( cmake -S . -B build -G Ninja -DFL_KERNELS="39;73;74" -DFL_BUILD_BENCH=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder test_paged test_decode test_gpu ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && { grep -E -B2 -A8 "error" $R/t/build.log | head -40; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $R/summary.txt
L=$PWD/build/libflash_ladder.so; export FLASH_LADDER_LIB=$L
t() { n=$1; s=$2; shift 2; timeout $s "$@" > $R/t/$n.txt 2>&1; echo "$n rc=$? $(grep -E '^\[  (PASSED|FAILED)' $R/t/$n.txt | tr '\n' ' ') $(( $(date +%s) - t0 )) s" >> $R/summary.txt; }
b() { n=$1; s=$2; shift 2; PYTHONUNBUFFERED=1 timeout $s python3 scripts/decode_bench.py --lib $L --graphs --kernels 73,74 --rounds 3 --repeats 20 --out $R/j/$n.json "$@" > $R/t/$n.txt 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt; }
b d96a 110 --d 96 --heads 32/8 --nq 16 --b 1,8,20,32 --nk 4096,8192,32768,131072
b d64a 100 --d 64 --heads 32/8 --nq 16 --b 1,8,20,32 --nk 4096,8192,32768,131072
t paged74 150 ./build/tests/test_paged --gtest_filter='PagedSame.Rung74*'
t gpu 60 ./build/tests/test_gpu --gtest_filter='*k74_*'
for tool in memcheck racecheck; do
  timeout 60 compute-sanitizer --tool $tool --kernel-name kns=k74_ --error-exitcode 9 python3 build-carry/sanitize74.py > $R/t/san74_$tool.txt 2>&1
  echo "$tool rc=$? $(tail -2 $R/t/san74_$tool.txt | tr '\n' ' ') $(( $(date +%s) - t0 )) s" >> $R/summary.txt
done
t decode 90 ./build/tests/test_decode
( cd python/tests && timeout 100 python3 -m unittest -v test_kvcache_gpu ) > $R/t/kvcache.txt 2>&1
echo "kvcache rc=$? $(tail -1 $R/t/kvcache.txt) $(( $(date +%s) - t0 )) s" >> $R/summary.txt
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_gmma_per_issue_active.ratio,launch__grid_size
for rung in 73 74; do
  timeout 40 ncu --profile-from-start off --clock-control none -k regex:"decode_kernel|combine_kernel" --metrics $M \
    python3 build-carry/ncu_b.py 16 $rung 96 8 32768 > $R/t/ncu_96_8_$rung.txt 2>&1
  echo "== d=96 B=8 Nk=32768 rung $rung rc=$? $(( $(date +%s) - t0 )) s" >> $R/brief.txt
  grep -E "decode_kernel|combine_kernel|gpu__time|dram__|smsp__|sm__|launch__" $R/t/ncu_96_8_$rung.txt | cut -c1-110 >> $R/brief.txt
done
b d96b 110 --d 96 --heads 32/8 --nq 8,16 --b 1,8,20,32 --nk 8192,32768
python3 build-carry/summ.py $R/j/*.json > $R/table.txt
cd $R && tar czf runs.tar.gz t j && cd - > /dev/null
cat $R/summary.txt; cat $R/brief.txt; cat $R/table.txt; grep -E "FAIL|DIFFERS|Failure" $R/t/paged74.txt $R/t/san74_memcheck.txt $R/t/kvcache.txt | head
