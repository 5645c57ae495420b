#!/usr/bin/env bash
# The long fuzz run, for the GPU machine: the fuzz test of tests/test_fuzz.cu with many cases per
# kernel and several seeds (ctest runs it with a short fixed budget: 20 cases, one seed).
#
#   scripts/fuzz.sh [seed ...]        default seeds: 1 2 3
# Environment:
#   FL_FUZZ_CASES=N   cases per kernel and seed (default 200)
#   BUILD=dir         the build (default build)      OUT=dir   logs go to $OUT/fuzz/ (default out)
#
# One log per seed ($OUT/fuzz/seed_S.log: a line per case, and for a failure the command that
# reruns it alone) and $OUT/fuzz/summary.md. Exit status 0 only when, for every seed, the test
# passed and ran every kernel's full count of cases: a run that skipped (no GPU) is a failure.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
OUT=${OUT:-out}
cases=${FL_FUZZ_CASES:-200}
seeds=("$@")
[ ${#seeds[@]} -eq 0 ] && seeds=(1 2 3)

bin=$BUILD/tests/test_gpu
if [ ! -x "$bin" ] || [ ! -x "$BUILD/ladder" ]; then
  echo "fuzz.sh: $bin or $BUILD/ladder not found (build first)" >&2
  exit 1
fi
kernels=$("$BUILD/ladder" --list | wc -l)
expected=$(( kernels * cases ))
dir=$OUT/fuzz
mkdir -p "$dir"
summary=$dir/summary.md
{
  echo "| seed | cases per kernel | kernels | cases run | failed | exit | s |"
  echo "|---|---|---|---|---|---|---|"
} >"$summary"
status=0
for seed in "${seeds[@]}"; do
  log=$dir/seed_$seed.log
  t0=$(date +%s)
  FL_FUZZ_SEED=$seed FL_FUZZ_CASES=$cases "$bin" --gtest_filter='*FuzzTest*' >"$log" 2>&1
  rc=$?
  ran=$(grep -c '^\[fuzz\] ' "$log")
  failed=$(grep -c '^\[fuzz\] .*: FAIL (' "$log")
  echo "| $seed | $cases | $kernels | $ran | $failed | $rc | $(( $(date +%s) - t0 )) |" >>"$summary"
  if [ $rc -ne 0 ] || [ "$ran" -ne $expected ]; then
    status=1
    echo "seed $seed: exit $rc, $ran of $expected cases run, $failed failed"
    grep -E 'rerun alone|Failure|SKIPPED' "$log" | head -20
  fi
done
cat "$summary"
exit $status
