#!/usr/bin/env bash
# One batched run on the GPU machine: build, test, verify, benchmark, compare, profile.
#
#   scripts/device_run.sh [stage ...]     stages: build test ladder bench sdpa ncu sanitize fuzz
#                                         (default: build test ladder bench)
# Environment:
#   KERNELS=0,1,2        kernels for bench/sdpa (default: all)
#   BENCH_ARGS="..."     extra flags for ladder_bench (e.g. --ladder_n=512,4096)
#   SDPA_ARGS="..."      extra flags for scripts/compare_sdpa.py
#   NCU_KERNELS="5 6"    kernels to profile     NCU_ARGS="..."  extra flags for profile_ncu.sh
#   NCU_METRICS=a,b,c    metrics for every profiled kernel (default: profile_ncu.sh's set;
#                        scripts/ncu_ladder_metrics.txt is the set the rung pages cite)
#   FUZZ_SEEDS="1 2 3"   seeds for the fuzz stage   FL_FUZZ_CASES=N  cases per kernel and seed
#   OUT=dir              where logs and JSON go (the device tool sets it)
# Everything goes under $OUT/run/ and is packed into $OUT/run.tar.gz; a short table is printed
# last.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out}
R=$OUT/run
mkdir -p "$R"
stages=("$@")
[ ${#stages[@]} -eq 0 ] && stages=(build test ladder bench)
has() { local s; for s in "${stages[@]}"; do [ "$s" = "$1" ] && return 0; done; return 1; }
status=0
summary=()
note() { summary+=("$*"); echo "== $*"; }

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv | tee "$R/gpu.txt"

if has build; then
  t0=$(date +%s)
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
    ${CMAKE_ARGS:-} >"$R/configure.log" 2>&1 || { note "configure FAILED"; tail -30 "$R/configure.log"; exit 1; }
  if cmake --build build -j 16 >"$R/build.log" 2>&1; then
    note "build ok ($(( $(date +%s) - t0 )) s)"
  else
    grep -E -B2 -A6 "error|FAILED" "$R/build.log" | head -80
    note "build FAILED"; exit 1
  fi
  python3 scripts/resource_report.py build >"$R/resources.md" 2>&1
fi

if has test; then
  t0=$(date +%s)
  # The sanitize tests have a stage of their own.
  ctest --test-dir build --output-on-failure -j 4 --timeout 900 -LE sanitize >"$R/ctest.log" 2>&1; rc=$?
  grep -E "tests passed|tests failed|Skipped|Failed|FAILED|\*\*\*" "$R/ctest.log" | tail -40
  note "ctest rc=$rc ($(( $(date +%s) - t0 )) s): $(grep -E 'tests passed' "$R/ctest.log")"
  [ $rc -ne 0 ] && status=1
fi

if has ladder; then
  ./build/ladder >"$R/ladder.txt" 2>&1; rc=$?
  cat "$R/ladder.txt"
  note "ladder rc=$rc"
  [ $rc -ne 0 ] && status=1
fi

if has bench; then
  t0=$(date +%s)
  ./build/ladder_bench ${KERNELS:+--ladder_kernels=$KERNELS} ${BENCH_ARGS:-} \
    --benchmark_out="$R/bench.json" --benchmark_out_format=json >"$R/bench.txt" 2>&1; rc=$?
  grep -E "median|ERROR|error" "$R/bench.txt" | head -120
  note "bench rc=$rc ($(( $(date +%s) - t0 )) s)"
fi

if has sdpa; then
  t0=$(date +%s)
  PYTHONUNBUFFERED=1 python3 scripts/compare_sdpa.py ${KERNELS:+--kernels $KERNELS} ${SDPA_ARGS:-} \
    --out "$R/sdpa.json" >"$R/sdpa.txt" 2>&1; rc=$?
  tail -60 "$R/sdpa.txt"
  note "sdpa rc=$rc ($(( $(date +%s) - t0 )) s)"
fi

if has ncu; then
  for k in ${NCU_KERNELS:-}; do
    scripts/profile_ncu.sh "$k" ${NCU_ARGS:-} ${NCU_METRICS:+--metrics $NCU_METRICS} \
      --out "$R/ncu_$k.csv" >"$R/ncu_$k.txt" 2>&1
    note "ncu $k rc=$?"
  done
fi

if has sanitize; then
  # tests/sanitize.cmake: one ctest per tool and dtype, each running scripts/sanitize.sh.
  t0=$(date +%s)
  rm -rf build/sanitize
  ctest --test-dir build -L sanitize --output-on-failure >"$R/sanitize_ctest.log" 2>&1; rc=$?
  cp -r build/sanitize "$R/sanitize" 2>/dev/null
  # One table of every run: the header once, then each test's rows.
  { head -2 "$(ls build/sanitize/*/summary.md | head -1)"
    awk 'FNR > 2' build/sanitize/*/summary.md; } >"$R/sanitize.md" 2>/dev/null
  cat "$R/sanitize.md"
  # Here a skip means no compute-sanitizer: the stage did not do its job.
  skipped=$(grep -c "\*\*\*Skipped" "$R/sanitize_ctest.log")
  note "sanitize rc=$rc, $skipped skipped ($(( $(date +%s) - t0 )) s): $(grep -E 'tests passed' "$R/sanitize_ctest.log")"
  { [ $rc -ne 0 ] || [ "$skipped" -ne 0 ]; } && status=1
fi

if has fuzz; then
  t0=$(date +%s)
  OUT="$R" scripts/fuzz.sh ${FUZZ_SEEDS:-} >"$R/fuzz.txt" 2>&1; rc=$?
  tail -20 "$R/fuzz.txt"
  note "fuzz rc=$rc ($(( $(date +%s) - t0 )) s)"
  [ $rc -ne 0 ] && status=1
fi

tar -czf "$OUT/run.tar.gz" -C "$OUT" run
echo
printf '%s\n' "${summary[@]}"
exit $status
