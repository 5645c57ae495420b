# Scratch: rung 23 from a given libflash_ladder (env LIB), fp16, H=16, env B, NQ, NK, D, CAUSAL; 3 launches, for ncu.
import math, os, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
import compare_sdpa as cs
import torch
B = int(os.environ.get("B", "16")); NQ = int(os.environ["NQ"]); NK = int(os.environ.get("NK", os.environ["NQ"]))
D = int(os.environ.get("D", "128")); causal = os.environ.get("CAUSAL", "0") == "1"
lad = cs.Ladder(os.environ["LIB"])
q = torch.randn(B, 16, NQ, D, device="cuda", dtype=torch.float16)
k, v = (torch.randn(B, 16, NK, D, device="cuda", dtype=torch.float16) for _ in range(2))
o = torch.empty_like(q)
p = cs.make_params(q, k, v, o, causal, 1 / math.sqrt(D))
for _ in range(4): lad.run(23, p)
torch.cuda.synchronize()
print("ok", o.float().abs().mean().item())
