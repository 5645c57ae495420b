#!/usr/bin/env bash
# Call 3: lib of 65, 66 (lone 512 KiB), 67 (lone 256 KiB); the cells 66/67 move; racecheck 65 d=64.
set -uo pipefail
R=$OUT; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv | tee $R/gpu.txt
find kernels -mindepth 1 -maxdepth 1 -type d -empty -delete
cp -r build-carry/tried/66_decode_lone_half build-carry/tried/67_decode_lone_short kernels/
t0=$(date +%s)
( cmake -S . -B build3 -G Ninja -DFL_KERNELS="65;66;67" -DFL_BUILD_BENCH=OFF -DFL_BUILD_TESTS=OFF -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build3 -j 16 --target flash_ladder ) > $R/build3.log 2>&1
echo "build3 rc=$? $(( $(date +%s) - t0 )) s" | tee -a $R/summary.txt
L=$PWD/build3/libflash_ladder.so
b() { PYTHONUNBUFFERED=1 timeout 150 python3 scripts/decode_bench.py --lib $L --graphs --kernels 65,66,67 --rounds 3 --repeats 20 "$@" ; }
t0=$(date +%s)
b --d 128 --heads 32/8 --b 5,6,7,8 --nk 768,1024 --nq 1 --out $R/u128g.json > $R/u128g.txt 2>&1; echo "u128g rc=$? $(( $(date +%s) - t0 ))" | tee -a $R/summary.txt
b --d 128 --heads 32/32 --b 2 --nk 768,1024 --nq 1,16 --out $R/u128m.json > $R/u128m.txt 2>&1; echo "u128m rc=$? $(( $(date +%s) - t0 ))" | tee -a $R/summary.txt
b --d 64 --heads 32/8 --b 5,8 --nk 1536,2048 --nq 1 --out $R/u64g.json > $R/u64g.txt 2>&1; echo "u64g rc=$? $(( $(date +%s) - t0 ))" | tee -a $R/summary.txt
b --d 96 --heads 32/8 --b 5,6,7,8 --nk 1024,1536,2048 --nq 1 --out $R/u96g.json > $R/u96g.txt 2>&1; echo "u96g rc=$? $(( $(date +%s) - t0 ))" | tee -a $R/summary.txt
export FLASH_LADDER_LIB=$L
t1=$(date +%s)
SAN_D=64 SAN_PAGES=0,64,256 timeout 200 compute-sanitizer --tool racecheck --kernel-name kns=k65_ --error-exitcode 9 python3 build-carry/san.py 65 > $R/race65.log 2>&1; echo "racecheck 65 d64 rc=$? $(( $(date +%s) - t1 )) s: $(grep -E 'san.py|RACECHECK SUMMARY' $R/race65.log | tr '\n' ' ')" | tee -a $R/summary.txt
for f in u128g u128m u64g u96g; do grep -A20 "^GB/s of K" $R/$f.txt | grep -E "^(shape|H=)"; done
cd $R && tar czf txt.tar.gz *.txt *.log && rm -f u*.txt build3.log race65.log; cd - >/dev/null
cat $R/summary.txt
