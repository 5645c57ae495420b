#!/usr/bin/env bash
# Rung 74 (decode_table_shared) beside rung 73: the test suite of a build of the two (the sanitize
# label aside), the paged one-row cells, the one-row calls at B = 8 (the cluster launches it
# changes) with the peers, compute-sanitizer on its cache calls, then the sanitize label.
set -uo pipefail
R=$OUT; mkdir -p $R/j $R/t; t0=$(date +%s)
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > $R/t/gpu.txt
git log --oneline -1 > $R/t/head.txt 2>/dev/null; git status --short >> $R/t/head.txt 2>/dev/null
( cmake -S . -B build -G Ninja -DFL_KERNELS="73;74" -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_CUDA_FLAGS="--resource-usage" && timeout 300 cmake --build build -j 16 ) > $R/t/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t0 )) s" >> $R/summary.txt; [ $rc -ne 0 ] && { grep -E -B2 -A8 "error" $R/t/build.log | head -40; exit 1; }
timeout 230 ctest --test-dir build --output-on-failure -j 10 --timeout 220 -LE sanitize > $R/t/ctest.log 2>&1
echo "ctest rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt
export FLASH_LADDER_LIB=$PWD/build/libflash_ladder.so
p() { n=$1; k=$2; shift 2; PYTHONUNBUFFERED=1 timeout 70 python3 scripts/paged_bench.py --kernels $k --nq 1 --d 128 --ragged --pages 64,256 --in-order --rounds 5 --out $R/j/$n.json "$@" > $R/t/$n.txt 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt; }
p b8a 73,74 --b 8 --nk 32768
p b8b 74,73 --b 8 --nk 32768
PYTHONUNBUFFERED=1 timeout 100 python3 scripts/decode_bench.py --graphs --kernels 73,74 --heads 32/8 --nq 1 --b 8 --nk 1024,4096,8192,32768,131072 --rounds 3 --out $R/j/dec.json > $R/t/dec.txt 2>&1
echo "dec rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt
for tool in memcheck racecheck; do
  left=$(( 520 - ($(date +%s) - t0) )); [ $left -lt 30 ] && break
  timeout $left compute-sanitizer --tool $tool --kernel-name kns=k74_ --error-exitcode 9 python3 scripts/sanitize_cache.py --kernel 74 --d 64,96,128,192 --pages 0,64,256 > $R/t/san_$tool.txt 2>&1
  echo "san $tool rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt
done
left=$(( 570 - ($(date +%s) - t0) ))
if [ $left -gt 40 ]; then
  timeout $left ctest --test-dir build --output-on-failure -L sanitize > $R/t/ctest_san.log 2>&1
  echo "ctest san rc=$? $(( $(date +%s) - t0 )) s" >> $R/summary.txt
fi
cd $R && tar czf runs.tar.gz t j && cd - > /dev/null
grep -E "tests passed|tests failed|Failed|\*\*\*" $R/t/ctest.log | head -12; grep -E "tests passed|tests failed" $R/t/ctest_san.log 2>/dev/null
tail -2 $R/t/san_memcheck.txt $R/t/san_racecheck.txt 2>/dev/null
cat $R/summary.txt; for n in b8a b8b; do grep -v "^ *$" $R/t/$n.txt | tail -3; done; grep -v "^ *$" $R/t/dec.txt | tail -8
