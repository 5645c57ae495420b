#!/usr/bin/env bash
# Rung 72 against rung 71 and two probes of its L2 promotion (73: 128 B, 74: none); its
# bit-for-bit test (smaller caches, a line a case); Nsight Compute's DRAM bytes at d = 128 and 96.
set -uo pipefail
R=$OUT; mkdir -p $R/j $R/t
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
cp -r build-carry/tried/73_trial_l2_128 build-carry/tried/74_trial_l2_none kernels/
t0=$(date +%s)
( cmake -S . -B build -G Ninja -DFL_KERNELS="71;72;73;74" -DFL_BUILD_BENCH=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j 16 --target flash_ladder test_paged ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && { grep -E -B2 -A8 "error" $R/t/build.log | head -40; exit 1; }
L=$PWD/build/libflash_ladder.so; export FLASH_LADDER_LIB=$L
timeout 200 ./build/tests/test_paged --gtest_filter='PagedSame.Rung72*' > $R/t/paged72.txt 2>&1
echo "paged72 rc=$? $(grep -E '^\[  (PASSED|FAILED)' $R/t/paged72.txt | tr '\n' ' ') $(( $(date +%s) - t0 )) s" >> $R/summary.txt
b() { n=$1; d=$2; shift 2; PYTHONUNBUFFERED=1 timeout 90 python3 scripts/decode_bench.py --lib $L --graphs --kernels 71,72,73,74 --d $d --rounds 3 --repeats 20 --out $R/j/$n.json "$@" > $R/t/$n.txt 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt; }
b p128 128 --heads 32/8 --nq 16 --b 8,32 --nk 32768
b p96 96 --heads 32/8 --nq 16 --b 8,32 --nk 32768
b p64 64 --heads 32/8 --nq 16 --b 8 --nk 32768
b p192 192 --heads 32/8 --nq 16 --b 1,8 --nk 32768
for d in 128 96; do for rung in 71 72 74; do
  timeout 60 ncu --profile-from-start off --clock-control none -k regex:"decode_kernel" \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,lts__t_bytes.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum \
    python3 build-carry/ncu_q16d.py 16 $rung $d > $R/t/ncu_${d}_$rung.txt 2>&1
  echo "ncu d=$d rung $rung rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt
  echo "== d=$d rung $rung" >> $R/brief.txt
  grep -E "gpu__time|dram__|lts__|smsp__" $R/t/ncu_${d}_$rung.txt | cut -c1-110 >> $R/brief.txt
done; done
python3 build-carry/summ.py $R/j/*.json > $R/table.txt
cd $R && tar czf runs.tar.gz t j && cd - > /dev/null
cat $R/summary.txt; cat $R/table.txt; cat $R/brief.txt; grep -E "FAILED|Failure|rror" $R/t/paged72.txt | head -10; grep -E " H=" $R/t/paged72.txt | tail -2
