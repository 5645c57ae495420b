#!/usr/bin/env bash
# Rung 16's full contract against FlashAttention-2 (PyTorch SDPA, flash backend), on the GPU
# machine; each series one process of scripts/compare_sdpa.py, the peers timed beside the kernel:
#   plus1   a length one above a block multiple against the multiple, at the same B (LADDER.md:
#           at most 5% TFLOP/s lost), non-causal and causal; three repeats in separate processes,
#           since one run of one cell moves by a few percent (docs/results/h100_repeats/)
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
for rep in 1 2 3; do
  py "plus1_r$rep" --batch 16 --n 2048,2049,4096,4097 --repeats 50
  py "plus1_b8_r$rep" --batch 8 --n 8192,8193 --repeats 50
  py "plus1_causal_r$rep" --causal --batch 16 --n 4096,4097 --repeats 50
done
py causal --causal --n 1024,2048,4096,8192,16384
py d256 --d 256 --n 1024,2048,4096,8192
py d256_causal --d 256 --causal --n 1024,2048,4096,8192
python3 scripts/contract_table.py "$R" | tee "$R/tables.md"
exit $status
