# One call of a rung for ncu: GQA 32/8, Nq = argv[1] (causal when > 1), rung argv[2], d argv[3],
# B argv[4], Nk argv[5].
import os, sys, torch
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import flash_ladder as fl
nq, rung, d, b, nk = (int(x) for x in sys.argv[1:6])
torch.manual_seed(0); dev = "cuda"; dt = torch.float16
q = torch.randn(b, nq, 32, d, device=dev, dtype=dt)
k = torch.randn(b, nk, 8, d, device=dev, dtype=dt); v = torch.randn_like(k)
c = lambda: fl.attention_with_kvcache(q, k, v, causal=nq > 1, kernel=rung)
c(); c(); torch.cuda.synchronize()
torch.cuda.profiler.start(); c(); torch.cuda.synchronize(); torch.cuda.profiler.stop()
print("done", nq, rung, d, b, nk)
