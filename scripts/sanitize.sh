#!/usr/bin/env bash
# compute-sanitizer on every kernel of the build: each tool, each dtype, a few small shapes.
#
#   scripts/sanitize.sh [options] [tool ...]    tools: memcheck racecheck synccheck initcheck
#                                               (default: all four)
#   --build DIR       the build holding ./ladder (default: build)
#   --out DIR         logs and summary.md go here (default: out/sanitize)
#   --dtype T         fp16 or bf16; repeatable (default: both)
#   --sanitizer PATH  compute-sanitizer (default: the one on PATH, else under $CUDA_HOME/bin)
#   --shape NAME      only this shape of the list below; repeatable (default: every shape; the
#                     check that every kernel ran a shape is made only then)
#   --jobs N          runs at once (default 1), each its own process on the same GPU
#
# Each run is `compute-sanitizer --tool T --error-exitcode 9 ladder <shape>`: ladder runs every
# kernel that claims the shape, forward rungs and then backward ones (each verified against the
# reference, then timed once), and skips the others, so the shapes are chosen for every kernel to run at least one of them in each dtype:
# N = 128 with d = 128 and d = 64 (every rung), ragged causal shapes with Nq != Nk (the rungs
# with masking and any length) and d = 256 (the rungs that take it). One log per run,
# <tool>_<dtype>_<shape>.log, and a markdown table of the reports, summary.md.
#
# Exit status: 0 when every run is clean (no report, every kernel check passed) and every kernel
# ran at least one shape per tool and dtype; 1 otherwise; 77 when there is no compute-sanitizer
# or no GPU (ctest's SKIP_RETURN_CODE: a skip, not a pass).
set -uo pipefail

build=build
out=out/sanitize
sanitizer=""
dtypes=()
tools=()
only=()
jobs=1
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --dtype) dtypes+=("$2"); shift 2 ;;
    --sanitizer) sanitizer=$2; shift 2 ;;
    --shape) only+=("$2"); shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    memcheck|racecheck|synccheck|initcheck) tools+=("$1"); shift ;;
    *) echo "sanitize.sh: unknown argument '$1'" >&2; exit 1 ;;
  esac
done
[ ${#tools[@]} -eq 0 ] && tools=(memcheck racecheck synccheck initcheck)
[ ${#dtypes[@]} -eq 0 ] && dtypes=(fp16 bf16)

# Small shapes: racecheck instruments every shared-memory access and is the slow one. N = 128
# still gives each tiled rung two or more KV tiles, so its pipeline (prefetch of the next tile
# while the current one is used) is exercised. The ragged ones also end in the short tiles of
# rung 16 (kernels/16_final/final.cuh): a query tile of few rows, split across the warps (22 rows
# at d = 128, 12 at d = 64, 2 at d = 256), and, at d = 64 and 256, a whole tile whose last KV
# tile holds at most 16 keys it sees, the narrow first visit (1 and 12 keys; at d = 128 it is
# left to tests/test_short_tiles.cu: this shape keeps Nq > Nk, rows that see no key).
# The Hopper rungs (17+) take tiles of 128 keys: at N = 384 they visit 3 KV tiles through their
# 2-stage ring, so a stage is reused (its mbarrier's second phase, parity 1) within the run.
# Nq = 129, Nk = 257 at d = 128 ends the 128 x 128 tiles of rungs 24-27 in a query tile of 1 row
# (after one whole one) and a KV tile of 1 key (after two): the edges of their short items (rung
# 27's narrow first visit among them). The decode rungs (37+) take only a few query rows (Nq x
# H_q / H_kv <= 64) and refuse the rest: the last two shapes are theirs, with 5 and 11 key tiles,
# which rung 38 splits over 5 and 11 blocks on an H100 (its rule, splits.h: the partials and the
# combine), causal with two positions in one tile, GQA and MQA, d = 128 and 64.
shapes=(
  "n128_d128_lse:--n 128 --d 128 --heads 2 --lse"
  "gqa_n384_d128_lse:--n 384 --d 128 --heads 4 --heads-kv 2 --lse"
  "gqa_bnhd_n128_d64:--n 128 --d 64 --heads 4 --heads-kv 2 --layout bnhd"
  "causal_nq140_nk141_d64_lse:--nq 140 --nk 141 --d 64 --heads 2 --causal --lse"
  "causal_nq150_nk67_d128:--nq 150 --nk 67 --d 128 --heads 2 --causal"
  "nq130_nk140_d256_lse:--nq 130 --nk 140 --d 256 --heads 2 --lse"
  "nq129_nk257_d128_lse:--nq 129 --nk 257 --d 128 --heads 2 --lse"
  "decode_nq2_nk300_d128_lse:--nq 2 --nk 300 --d 128 --heads 8 --heads-kv 2 --causal --lse"
  "decode_nq1_nk700_d64_bnhd:--nq 1 --nk 700 --d 64 --heads 4 --heads-kv 1 --layout bnhd"
)

if [ ${#only[@]} -gt 0 ]; then
  picked=()
  for name in "${only[@]}"; do
    found=""
    for entry in "${shapes[@]}"; do [ "${entry%%:*}" = "$name" ] && picked+=("$entry") && found=1; done
    [ -z "$found" ] && { echo "sanitize.sh: no shape '$name'" >&2; exit 1; }
  done
  shapes=("${picked[@]}")
fi
case $jobs in ''|*[!0-9]*|0) echo "sanitize.sh: --jobs takes a count >= 1" >&2; exit 1 ;; esac

ladder=$build/ladder
if [ ! -x "$ladder" ]; then
  echo "sanitize.sh: $ladder not found (build first)" >&2
  exit 1
fi
if [ -z "$sanitizer" ] || [ ! -x "$sanitizer" ]; then
  sanitizer=$(command -v compute-sanitizer || true)
  [ -z "$sanitizer" ] && [ -x "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer" ] &&
    sanitizer=${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer
fi
if [ -z "$sanitizer" ]; then
  echo "SKIP: compute-sanitizer not found (it comes with the CUDA toolkit)"
  exit 77
fi
# ladder exits 2 when there is no usable GPU; anything else but 0 is a broken build.
"$ladder" --kernel 0 --n 8 --batch 1 --heads 1 --d 64 --warmup 0 --repeats 1 --no-verify \
  >/dev/null 2>&1
probe=$?
if [ $probe -eq 2 ]; then
  echo "SKIP: no GPU ($ladder says so)"
  exit 77
elif [ $probe -ne 0 ]; then
  echo "sanitize.sh: $ladder failed on a trivial run (exit $probe)" >&2
  exit 1
fi

mkdir -p "$out"
summary=$out/summary.md
{
  echo "| tool | dtype | shape | kernels run | reports | exit | result | s |"
  echo "|---|---|---|---|---|---|---|---|"
} >"$summary"
status=0

# The number of reports in a log: racecheck counts hazards (errors and warnings), the other
# tools errors. Empty when the summary line is missing (the run died before the tool's report).
count_reports() {
  local tool=$1 log=$2
  if [ "$tool" = racecheck ]; then
    sed -nE 's/.*RACECHECK SUMMARY: .*\(([0-9]+) errors?, ([0-9]+) warnings?\).*/\1 \2/p' "$log" |
      tail -1 | awk '{print $1 + $2}'
  else
    # The line that ends in the count: a second one ("N errors were not printed") may follow.
    sed -nE 's/.*ERROR SUMMARY: ([0-9]+) errors?$/\1/p' "$log" | tail -1
  fi
}

# One run: the tool over ladder on one shape. Its log, and a line "<rc> <seconds>" in <log>.rc.
run_one() {
  local tool=$1 dtype=$2 log=$3
  shift 3
  local t0 rc
  t0=$(date +%s)
  # The tool's report goes to a file of its own and is appended after ladder's output, so
  # that the two never interleave inside a line of ladder's table.
  "$sanitizer" --tool "$tool" --error-exitcode 9 --log-file "$log.tool" "$ladder" \
    "$@" --dtype "$dtype" --batch 1 --warmup 0 --repeats 1 >"$log" 2>&1
  rc=$?
  [ -f "$log.tool" ] && cat "$log.tool" >>"$log" && rm -f "$log.tool"
  echo "$rc $(( $(date +%s) - t0 ))" >"$log.rc"
}

# Every run, --jobs at a time; then the logs are read in order.
for tool in "${tools[@]}"; do
  for dtype in "${dtypes[@]}"; do
    for entry in "${shapes[@]}"; do
      while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
      read -r -a args <<<"${entry#*:}"
      rm -f "$out/${tool}_${dtype}_${entry%%:*}.log.rc"  # none left from an earlier run
      run_one "$tool" "$dtype" "$out/${tool}_${dtype}_${entry%%:*}.log" "${args[@]}" &
    done
  done
done
wait

# Every rung of the build, forward and backward: ladder runs both tables on each shape.
mapfile -t kernels < <("$ladder" --list --op both | awk '{print $1}')
for tool in "${tools[@]}"; do
  for dtype in "${dtypes[@]}"; do
    declare -A ran=()
    for entry in "${shapes[@]}"; do
      name=${entry%%:*}
      log=$out/${tool}_${dtype}_${name}.log
      rc=died seconds=""
      [ -f "$log.rc" ] && read -r rc seconds <"$log.rc"
      # Kernels that ran: the rows of ladder's tables that are not "skipped:".
      mapfile -t here < <(awk '$1 ~ /^[0-9][0-9]_/ && $2 != "skipped:" {print $1}' "$log")
      for k in "${here[@]}"; do ran[$k]=1; done
      reports=$(count_reports "$tool" "$log")
      case $rc in
        0) result=clean ;;
        9) result="REPORTS" ;;
        1) result="KERNEL CHECK FAILED" ;;
        *) result="CRASHED" ;;
      esac
      if [ -z "$reports" ]; then
        reports="?"
        result="NO SUMMARY ($result)"
      elif [ "$reports" -gt 0 ] && [ $rc -eq 0 ]; then
        result=REPORTS  # racecheck warnings do not set the exit code; they count here
      fi
      [ "$result" != clean ] && status=1
      echo "| $tool | $dtype | $name | ${#here[@]} | $reports | $rc | $result | $seconds |" >>"$summary"
      echo "$tool $dtype $name: ${#here[@]} kernels, $reports reports, exit $rc, $result ($seconds s)"
    done
    missing=()
    [ ${#only[@]} -eq 0 ] && for k in "${kernels[@]}"; do [ -z "${ran[$k]:-}" ] && missing+=("$k"); done
    if [ ${#missing[@]} -gt 0 ]; then
      echo "| $tool | $dtype | (all) | ran no shape: ${missing[*]} | | | NOT COVERED | |" >>"$summary"
      echo "$tool $dtype: kernels that ran no shape: ${missing[*]}"
      status=1
    fi
    unset ran
  done
done

echo
cat "$summary"
exit $status
