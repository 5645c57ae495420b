#!/usr/bin/env bash
# Compiler launcher for the kernels: runs the compile command unchanged and keeps what it prints
# (the ptxas resource report from --resource-usage) beside the object file as <object>.ptxas.txt.
# tests/test_spills.cpp and scripts/resource_report.py read those files.
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
# Show warnings and errors as the compiler would; keep the routine ptxas info lines quiet.
grep -v -e '^ptxas info' -e 'bytes stack frame' -e '^    ' -e '^$' "$log" >&2
exit $rc
