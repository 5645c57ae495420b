#!/usr/bin/env bash
# Device run 107: what limits rung 23 at d = 128, N = 512 and 1024 (B = 16, H = 16, non-causal): Nsight Compute on
# rung 23 (the tree, 96baec1), cuDNN and FlashAttention-2, one launch each (the third), the GPU's own clocks.
set -uo pipefail
R=/tmp/run107; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader | tee $R/gpu.txt
t0=$(date +%s)
cp build-carry/runBK.sh $R/run.sh; cp build-carry/ncu_sdpa2.py $R/
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "-DFL_KERNELS=23" >/dev/null 2>&1 || exit 1
cmake --build build -j 16 --target ladder >$R/build.log 2>&1 || { grep -E -A5 "error" $R/build.log | head -40; exit 1; }
echo "build $(( $(date +%s)-t0 )) s"
M="$(cat scripts/ncu_hopper_metrics.txt),sm__cycles_elapsed.avg.per_second,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__issue_active.avg.pct_of_peak_sustained_active"
known=$(ncu --query-metrics 2>/dev/null | awk 'NF {print $1}'); kept=()
IFS=, read -ra wanted <<<"$M"; for m in "${wanted[@]}"; do grep -qx "${m%%.*}" <<<"$known" && kept+=("$m"); done
MK=$(IFS=,; echo "${kept[*]}")
for n in 512 1024; do
  timeout 120 scripts/profile_ncu.sh 23 --n $n --batch 16 --metrics "$MK" --out $R/ncu23_$n.csv > $R/ncu23_$n.txt 2>&1; echo "ncu 23 $n rc=$? $(( $(date +%s)-t0 )) s"
  for be in cudnn fa2; do
    N=$n B=16 BE=$be timeout 120 ncu --clock-control none --kernel-name regex:"sdpa|flash|fmha|attn|attention" --launch-skip 2 --launch-count 1 --metrics "$MK" --csv --page raw python3 build-carry/ncu_sdpa2.py > $R/ncu_${be}_$n.csv 2> $R/ncu_${be}_$n.err; echo "ncu $be $n rc=$? $(( $(date +%s)-t0 )) s"
  done
  tar czf $OUT/run107.tgz -C /tmp run107
done
python3 - <<'PY'
import csv, glob
keys = ["gpu__time_duration.sum","sm__cycles_elapsed.avg.per_second","sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active","smsp__inst_executed.sum","smsp__issue_active.avg.pct_of_peak_sustained_active","dram__bytes.sum","dram__throughput.avg.pct_of_peak_sustained_elapsed","lts__t_bytes.sum","smsp__average_warps_issue_stalled_wait_per_issue_active.ratio","smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio","smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio","smsp__average_warps_issue_stalled_gmma_per_issue_active.ratio","smsp__average_warps_issue_stalled_sleeping_per_issue_active.ratio","smsp__average_warps_issue_stalled_dispatch_stall_per_issue_active.ratio","smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio"]
for f in sorted(glob.glob('/tmp/run107/ncu*.csv')):
    rows = [r for r in csv.reader(open(f)) if r]
    try:
        h = rows.index(next(r for r in rows if "Kernel Name" in r)); names, units, vals = rows[h], rows[h+1], rows[h+2]
    except Exception as e:
        print(f, "no data", e); continue
    d = dict(zip(names, vals)); u = dict(zip(names, units))
    print(f.split('/')[-1], d.get("Kernel Name","")[:70], d.get("Grid Size",""), d.get("Block Size",""))
    print("   " + " | ".join("%s=%s" % (k.replace("smsp__average_warps_issue_stalled_","st_").replace("_per_issue_active.ratio","").split(".")[0], d.get(k, "-")) for k in keys))
PY
tar czf $OUT/run107.tgz -C /tmp run107
