#!/usr/bin/env bash
# Compiler launcher for the kernels: runs the compile command unchanged and keeps what it prints
# (the ptxas resource report from --resource-usage) beside the object file as <object>.ptxas.txt.
# tests/test_spills.cpp, tests/test_hopper_build.cpp and scripts/resource_report.py read those files.
out=""
prev=""
for a in "$@"; do
  [ "$prev" = "-o" ] && out="$a"
  prev="$a"
done
if [ -z "$out" ]; then exec "$@"; fi
log="${out}.ptxas.txt"
"$@" >"$log" 2>&1
rc=$?
# Show warnings and errors as the compiler would; keep the routine ptxas info lines quiet, but not
# the numbered performance notes that ptxas files under "info" (e.g. "(C7511) Potential Performance
# Loss: wgmma.mma_async instructions are serialized ...", "(C7508) ... 'setmaxnreg' ignored ...").
awk '/^ptxas info *: \(C[0-9]+\)/ { print; next }
     /^ptxas info/ || /bytes stack frame/ || /^    / || /^$/ { next }
     { print }' "$log" >&2
exit $rc
