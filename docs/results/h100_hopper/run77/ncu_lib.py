# Scratch: rung 23 from a given libflash_ladder (env LIB), fp16, B, H=16, N, d (env B, N, D, CAUSAL), 3 launches, for ncu.
import math, os, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
import compare_sdpa as cs
import torch
B = int(os.environ.get("B", "16")); N = int(os.environ.get("N", "4096")); D = int(os.environ.get("D", "128"))
causal = os.environ.get("CAUSAL", "1") == "1"
lad = cs.Ladder(os.environ["LIB"])
q, k, v = (torch.randn(B, 16, N, D, device="cuda", dtype=torch.float16) for _ in range(3))
o = torch.empty_like(q)
p = cs.make_params(q, k, v, o, causal, 1 / math.sqrt(D))
for _ in range(3): lad.run(23, p)
torch.cuda.synchronize()
print("ok", o.float().abs().mean().item())
