#!/usr/bin/env bash
# Nsight Compute metrics of one rung, for the claims on its page ("bank conflicts -> 0", "fewer
# stalls on cp.async.wait", ...). Profiles one timed launch of the kernel, not the warm-up.
#
#   scripts/profile_ncu.sh <kernel-number> [--n N] [--batch B] [--heads H] [--d D] [--dtype fp16]
#                          [--causal] [--metrics m1,m2,...] [--out file.csv] [--warmup W]
#                          [--launch-skip S] [--ladder path] [-- extra ladder flags]
#
#   scripts/profile_ncu.sh 6 --n 4096                  # default metrics, N = 4096, B = 4
#   scripts/profile_ncu.sh 05 --metrics smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio
#
# Runs `ncu --clock-control none` (the GPU's own clocks, as the benchmarks see them) on
#   build/ladder --kernel NN --n N --batch B --warmup W --repeats 1 --no-verify
# matching only kernels whose demangled name contains "::kNN_" (the rung's namespace, e.g.
# fl::k06_swizzle::attention_kernel<...>), skipping the W warm-up launches (--launch-skip W) and
# profiling one (--launch-count 1). The report is kept as <out>.ncu-rep (open it in ncu-ui); the
# raw page goes to <out> as CSV (--csv --page raw) and is printed, then listed one metric a line.
# Kernel 00 (cuBLAS) launches several kernels per call: use --launch-skip to pick one.
set -euo pipefail
cd "$(dirname "$0")/.."

DEFAULT_METRICS=(
  gpu__time_duration.sum
  launch__registers_per_thread
  smsp__inst_executed.sum
  smsp__inst_executed_op_ldsm.sum
  sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
  sm__sass_l1tex_data_bank_conflicts_pipe_lsu_mem_shared_op_ldsm.sum
  l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum
  smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio
  smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio
  smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio
  smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio
  dram__bytes.sum
)

usage() { sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-1}"; }

[ $# -ge 1 ] || usage
case "$1" in -h|--help) usage 0 ;; esac
kernel="$1"
shift
[[ "$kernel" =~ ^[0-9]+$ ]] || { echo "profile_ncu.sh: kernel number expected, got '$kernel'" >&2; exit 1; }
NN=$(printf '%02d' "$((10#$kernel))")

n=4096
batch=4
warmup=1
skip=""
metrics=$(IFS=,; echo "${DEFAULT_METRICS[*]}")
out=""
ladder=build/ladder
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --n) n="$2"; shift 2 ;;
    --batch) batch="$2"; shift 2 ;;
    --heads|--d|--dtype|--seed) extra+=("$1" "$2"); shift 2 ;;
    --causal) extra+=("$1"); shift ;;
    --metrics) metrics="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --launch-skip) skip="$2"; shift 2 ;;
    --ladder) ladder="$2"; shift 2 ;;
    --) shift; extra+=("$@"); break ;;
    -h|--help) usage 0 ;;
    *) echo "profile_ncu.sh: unknown option '$1'" >&2; usage ;;
  esac
done
skip=${skip:-$warmup}
out=${out:-ncu_${NN}_n${n}.csv}
rep="${out%.csv}.ncu-rep"

command -v ncu >/dev/null || { echo "profile_ncu.sh: ncu (Nsight Compute) is not on PATH" >&2; exit 1; }
[ -x "$ladder" ] || { echo "profile_ncu.sh: $ladder not built (cmake --build build)" >&2; exit 1; }
mkdir -p "$(dirname "$out")"

# Keep only metrics this ncu knows on this GPU (one unknown name fails the whole run); the
# dropped ones are listed.
known=$(ncu --query-metrics 2>/dev/null | awk 'NF {print $1}')
if [ -n "$known" ]; then
  kept=()
  IFS=, read -ra wanted <<<"$metrics"
  for m in "${wanted[@]}"; do
    if grep -qx "${m%%.*}" <<<"$known"; then kept+=("$m"); else echo "== dropping unknown metric $m" >&2; fi
  done
  metrics=$(IFS=,; echo "${kept[*]}")
fi

cmd=("$ladder" --kernel "$NN" --n "$n" --batch "$batch" --warmup "$warmup" --repeats 1
     --no-verify "${extra[@]}")
echo "== ncu on: ${cmd[*]}"
echo "== kernels matching ::k${NN}_, launch-skip $skip, launch-count 1"
ncu --clock-control none \
    --kernel-name-base demangled --kernel-name "regex:::k${NN}_" \
    --launch-skip "$skip" --launch-count 1 \
    --metrics "$metrics" \
    --export "$rep" --force-overwrite \
    "${cmd[@]}"

if [ ! -f "$rep" ] || ! ncu --import "$rep" --csv --page raw >"$out" || [ "$(wc -l <"$out")" -lt 3 ]; then
  echo "profile_ncu.sh: no kernel matched ::k${NN}_ (is kernel $NN built? see $ladder --list)" >&2
  exit 1
fi
echo
echo "== $out"
cat "$out"
echo
# The raw page is one row of headers, one of units, one of values per profiled launch: list it
# one metric a line.
python3 - "$out" <<'EOF' || true
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
names, units, values = rows[0], rows[1], rows[2:]
for launch in values:
    for name, unit, value in zip(names, units, launch):
        if "__" in name or name in ("Kernel Name", "Block Size", "Grid Size"):
            print(f"{name:<78} {value:>16} {unit}")
EOF
