#!/usr/bin/env bash
# SASS counts of the Hopper rungs (17 and up) for their pages: for every attention kernel of each
# rung, how many HGMMA (wgmma, fp16/bf16), QGMMA (wgmma, fp8), HMMA (mma.sync: should be 0),
# LDL/STL (local memory: spills or stack) instructions the compiler emitted (static counts).
# Reads the objects of target fl_kernels_sm90a; cuobjdump from PATH or the pip wheels
# (scripts/sass_counts.py finds it).
#
#   scripts/sass_hopper.sh [build] [extra sass_counts.py options, e.g. --loop or --json out.json]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-build}"
shift || true
base="$build/CMakeFiles/fl_kernels_sm90a.dir/kernels"
if [ ! -d "$base" ]; then
  echo "sass_hopper.sh: no Hopper rung objects under $base (build with FL_HOPPER=ON first)" >&2
  exit 1
fi
status=0
for dir in "$base"/[0-9][0-9]_*/; do
  rung="$(basename "$dir")"
  for obj in "$dir"*.o; do
    [ -e "$obj" ] || continue
    echo "## $rung ($(basename "$obj"))"
    echo
    python3 "$root/scripts/sass_counts.py" "$obj" --filter attention \
      --opcodes HGMMA,QGMMA,HMMA,LDL,STL "$@" || status=1
    echo
  done
done
exit $status
