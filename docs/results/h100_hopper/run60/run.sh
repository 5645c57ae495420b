#!/usr/bin/env bash
# Device run 60: rung 23 variants at d = 128 (A = tree, Q = Q in registers (RS for S), P = 1/4 of
# exps as a polynomial, E = no exp (diagnostic), L = no K/V loads after the first (diagnostic));
# ncu of rung 23 (A, Q) and of cuDNN / FA2 on the same shape.
set -uo pipefail
R=/tmp/run60; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
build() {  # name flags targets...
  local n=$1 f=$2; shift 2
  cmake -S . -B build-$n -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" "-DCMAKE_CUDA_FLAGS=$f" >/dev/null 2>&1 || { echo "cmake $n failed"; return 1; }
  cmake --build build-$n -j 4 --target "$@" >$R/build_$n.log 2>&1 || { grep -E -A5 "error" $R/build_$n.log | head -30; return 1; }
}
build A "" flash_ladder ladder &
build Q "-DFL_V_QREG" flash_ladder ladder test_gpu &
build P "-DFL_V_POLY=1" flash_ladder &
build E "-DFL_V_NOEXP" flash_ladder &
build L "-DFL_V_NOLOAD" flash_ladder &
wait
echo "builds $(( $(date +%s)-t0 )) s"
timeout 120 ./build-Q/tests/test_gpu --gtest_filter='*23_final_hopper*:ShortTiles.*' >$R/gpu23_Q.log 2>&1; echo "gpu23 Q rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $R/gpu23_Q.log | head -20
V="python3 build-carry/variants.py --libs A=build-A/libflash_ladder.so,Q=build-Q/libflash_ladder.so,P=build-P/libflash_ladder.so,E=build-E/libflash_ladder.so,L=build-L/libflash_ladder.so --rounds 8"
timeout 150 $V --d 128 --n 2048,4096,8192 --out $R/variants_d128.json > $R/variants.txt 2>&1
timeout 80 $V --d 128 --n 4096 --causal --out $R/variants_d128c.json >> $R/variants.txt 2>&1
echo "t $(( $(date +%s)-t0 )) s"
M="$(cat scripts/ncu_hopper_metrics.txt),sm__cycles_elapsed.avg.per_second,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,sm__memory_throughput.avg.pct_of_peak_sustained_elapsed,l1tex__throughput.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active"
for v in A Q; do
  timeout 90 scripts/profile_ncu.sh 23 --n 4096 --batch 4 --ladder build-$v/ladder --metrics "$M" --out $R/ncu23_$v.csv > $R/ncu23_$v.txt 2>&1; echo "ncu $v rc=$?"
done
known=$(ncu --query-metrics 2>/dev/null | awk 'NF {print $1}'); kept=()
IFS=, read -ra wanted <<<"$M"; for m in "${wanted[@]}"; do grep -qx "${m%%.*}" <<<"$known" && kept+=("$m"); done
MK=$(IFS=,; echo "${kept[*]}")
for be in cudnn fa2; do
  BE=$be timeout 90 ncu --clock-control none --kernel-name regex:"sdpa|flash|fmha|attn|attention" --launch-skip 1 --launch-count 1 --metrics "$MK" --csv --page raw python3 build-carry/ncu_sdpa.py > $R/ncu_$be.csv 2> $R/ncu_$be.err; echo "ncu $be rc=$?"
done
echo "total $(( $(date +%s)-t0 )) s"
grep "^d=" $R/variants.txt
python3 - <<'PY'
import csv, glob
keys = ["gpu__time_duration.sum","sm__cycles_elapsed.avg.per_second","sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active","smsp__inst_executed.sum","smsp__inst_executed_pipe_xu.sum","smsp__issue_active.avg.pct_of_peak_sustained_active","l1tex__throughput.avg.pct_of_peak_sustained_active","sm__memory_throughput.avg.pct_of_peak_sustained_elapsed","lts__t_bytes.sum","smsp__average_warps_issue_stalled_wait_per_issue_active.ratio","smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio","smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio"]
for f in sorted(glob.glob('/tmp/run60/ncu*.csv')):
    rows = [r for r in csv.reader(open(f)) if r]
    try:
        h = rows.index(next(r for r in rows if "Kernel Name" in r)); names, units, vals = rows[h], rows[h+1], rows[h+2]
    except Exception as e:
        print(f, "no data", e); continue
    d = dict(zip(names, vals)); u = dict(zip(names, units))
    print(f.split('/')[-1], d.get("Kernel Name","")[:60])
    for k in keys: print("   ", k, d.get(k, "-"), u.get(k, ""))
PY
tar czf $OUT/run60.tgz -C /tmp run60
