#!/usr/bin/env bash
# Rung 16's full contract against FlashAttention-2 (PyTorch SDPA, flash backend), on the GPU
# machine; each series one process of scripts/compare_sdpa.py, the peers timed beside the kernel:
#   plus1   a length one above a block multiple against the multiple, at the same B (the
#           project's target: at most 5% TFLOP/s lost), non-causal and causal:
#           scripts/plus1_bench.py, which times N and N + 1 in alternating rounds (one cell of a
#           sweep moves by a few percent from run to run), FlashAttention-2 beside
#   causal  the causal sweep, N = 1024 ... 16384 at the sweep's B (at least FA2's causal speed
#           from N = 2048)
#   d256    d = 256, non-causal and causal
# Then scripts/contract_table.py prints the tables. Output: $OUT/contract/*.json and *.txt.
#   KERNELS=15,16 scripts/contract_bench.sh      (default: 16)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out}
R=$OUT/contract
mkdir -p "$R"
K=${KERNELS:-16}
status=0
py() {  # name, compare_sdpa.py flags...
  local name=$1; shift
  PYTHONUNBUFFERED=1 python3 scripts/compare_sdpa.py --kernels "$K" "$@" --out "$R/$name.json" \
    >"$R/$name.txt" 2>&1 || { echo "compare_sdpa.py $* failed (see $R/$name.txt)"; status=1; }
}
PYTHONUNBUFFERED=1 python3 scripts/plus1_bench.py --kernel "${K%%,*}" --out "$R/plus1.json" \
  >"$R/plus1.txt" 2>&1 || { echo "plus1_bench.py failed or missed the 5% (see $R/plus1.txt)"; status=1; }
py causal --causal --n 1024,2048,4096,8192,16384
py d256 --d 256 --n 1024,2048,4096,8192
py d256_causal --d 256 --causal --n 1024,2048,4096,8192
python3 scripts/contract_table.py "$R" | tee "$R/tables.md"
exit $status
