#!/usr/bin/env bash
# Call 2 (same warm machine): the lone-chunk trial (rung 66 = 65 with 512 KiB) vs 65; racecheck d=64.
set -uo pipefail
R=$OUT; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv | tee $R/gpu.txt
ls build66/libflash_ladder.so build/libflash_ladder.so || exit 3
L=$PWD/build66/libflash_ladder.so
b() { PYTHONUNBUFFERED=1 timeout 150 python3 scripts/decode_bench.py --lib $L --graphs --kernels 65,66 --rounds 3 --repeats 20 "$@" ; }
t0=$(date +%s)
b --d 64 --heads 32/8 --b 5,6,7,8,10,12 --nk 3072,4096 --nq 1 --out $R/t64g.json > $R/t64g.txt 2>&1; echo "t64g rc=$? $(( $(date +%s) - t0 ))" | tee -a $R/summary.txt
b --d 64 --heads 32/32 --b 2,3 --nk 3072,4096 --nq 1,16 --out $R/t64m.json > $R/t64m.txt 2>&1; echo "t64m rc=$? $(( $(date +%s) - t0 ))" | tee -a $R/summary.txt
b --d 128 --heads 32/8 --b 5,6,7,8 --nk 1536,2048 --nq 1 --out $R/t128g.json > $R/t128g.txt 2>&1; echo "t128g rc=$? $(( $(date +%s) - t0 ))" | tee -a $R/summary.txt
b --d 128 --heads 32/32 --b 2 --nk 1536,2048 --nq 1,16 --out $R/t128m.json > $R/t128m.txt 2>&1; echo "t128m rc=$? $(( $(date +%s) - t0 ))" | tee -a $R/summary.txt
export FLASH_LADDER_LIB=$PWD/build/libflash_ladder.so
t1=$(date +%s)
SAN_D=64 SAN_PAGES=0,64,256 timeout 240 compute-sanitizer --tool racecheck --kernel-name regex:k65_ --error-exitcode 9 python3 build-carry/san.py 65 > $R/race65.log 2>&1; echo "racecheck 65 d64 rc=$? $(( $(date +%s) - t1 )) s: $(grep -E 'san.py|RACECHECK SUMMARY' $R/race65.log | tr '\n' ' ')" | tee -a $R/summary.txt
for f in t64g t64m t128g t128m; do tail -14 $R/$f.txt; done
cat $R/summary.txt
