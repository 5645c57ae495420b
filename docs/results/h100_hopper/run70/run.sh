#!/usr/bin/env bash
# Device run 70: (1) ncu at N = 1024, B = 16, d = 128: rung 23 (the tree, two Q stages) and cuDNN,
# for what cuDNN does at short lengths; (2) S3 = the tree with three K/V stages at d = 64, against
# the tree (Q2), one process, 8 rounds; GPU tests on S3.
set -uo pipefail
R=/tmp/run70; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
mkdir -p /tmp/srcS3 && tar --exclude='./build*' -cf - . | tar -xf - -C /tmp/srcS3
cp build-carry/s3.cu /tmp/srcS3/kernels/23_final_hopper/final_hopper.cu
build() {  # name srcdir kernels targets...
  local n=$1 src=$2 k=$3; shift 3
  cmake -S $src -B build-$n -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=$k" >/dev/null 2>&1 || { echo "cmake $n failed"; return 1; }
  cmake --build build-$n -j 8 --target "$@" >$R/build_$n.log 2>&1 || { grep -E -A5 "error" $R/build_$n.log | head -30; return 1; }
}
build Q2 . "23" flash_ladder ladder &
build S3 /tmp/srcS3 "16;23" flash_ladder test_gpu &
wait
echo "builds $(( $(date +%s)-t0 )) s"
timeout 90 ./build-S3/tests/test_gpu --gtest_filter='*23_final_hopper*:ShortTiles.*' >$R/gpu23_S3.log 2>&1; echo "gpu23 S3 rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $R/gpu23_S3.log | head -5
M="$(cat scripts/ncu_hopper_metrics.txt),sm__cycles_elapsed.avg.per_second,sm__memory_throughput.avg.pct_of_peak_sustained_elapsed,smsp__issue_active.avg.pct_of_peak_sustained_active,launch__grid_size,launch__block_size,launch__shared_mem_per_block_dynamic,launch__registers_per_thread,lts__t_sector_hit_rate.pct"
timeout 90 scripts/profile_ncu.sh 23 --n 1024 --batch 16 --ladder build-Q2/ladder --metrics "$M" --out $R/ncu23_n1024.csv > $R/ncu23_n1024.txt 2>&1; echo "ncu 23 rc=$?"
known=$(ncu --query-metrics 2>/dev/null | awk 'NF {print $1}'); kept=()
IFS=, read -ra wanted <<<"$M"; for m in "${wanted[@]}"; do grep -qx "${m%%.*}" <<<"$known" && kept+=("$m"); done
MK=$(IFS=,; echo "${kept[*]}")
BE=cudnn N=1024 B=16 timeout 90 ncu --clock-control none --kernel-name regex:"sdpa|flash|fmha|attn|attention" --launch-skip 1 --launch-count 1 --metrics "$MK" --csv --page raw python3 build-carry/ncu_sdpa.py > $R/ncu_cudnn_n1024.csv 2> $R/ncu_cudnn_n1024.err; echo "ncu cudnn rc=$?"
echo "t $(( $(date +%s)-t0 )) s"
V="python3 build-carry/variants.py --libs Q2=build-Q2/libflash_ladder.so,S3=build-S3/libflash_ladder.so --rounds 8"
timeout 90 $V --d 64 --n 1024,2048,8192 --out $R/variants_d64.json > $R/variants.txt 2>&1
timeout 80 $V --d 64 --n 2048,4096 --causal --out $R/variants_d64c.json >> $R/variants.txt 2>&1
echo "total $(( $(date +%s)-t0 )) s"
python3 - <<'PY'
import json,statistics,glob,csv
for f in sorted(glob.glob('/tmp/run70/variants_*.json')):
    for r in json.load(open(f)):
        a=r['runs']['Q2']; out=[]
        for v in ['S3','cudnn']:
            rat=[x/y for x,y in zip(r['runs'][v],a)][1:]
            out.append(f"{v}/Q2 {statistics.median(rat):.3f} [{min(rat):.3f}-{max(rat):.3f}]")
        print(r['d'], r['N'], r['causal'], ' | '.join(out))
for f in sorted(glob.glob('/tmp/run70/ncu*.csv')):
    rows = [r for r in csv.reader(open(f)) if r]
    try:
        h = rows.index(next(r for r in rows if "Kernel Name" in r)); names, units, vals = rows[h], rows[h+1], rows[h+2]
    except Exception as e:
        print(f, "no data", e); continue
    d = dict(zip(names, vals)); u = dict(zip(names, units))
    print(f.split('/')[-1], d.get("Kernel Name","")[:70])
    for k in names:
        if k.startswith(('gpu__time','sm__','smsp__','lts__','dram__','launch__grid','launch__block_size','launch__shared_mem_per_block_dyn','launch__regis')) and 'stalled' not in k or 'stalled_wait' in k or 'stalled_barrier' in k or 'long_score' in k:
            if k.endswith(('.max','.min','.avg')) and not k.endswith('pct_of_peak_sustained_active') : continue
            print("   ", k, d.get(k, "-"), u.get(k, ""))
PY
tar czf $OUT/run70.tgz -C /tmp run70
