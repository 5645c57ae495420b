# One call of rung N (argv[1]) at d = 96, GQA 32/8, B = 8, 16 query rows (causal), 8192 keys, for ncu.
import os, sys, torch
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import flash_ladder as fl
kern = int(sys.argv[1])
torch.manual_seed(0); dev = "cuda"; dt = torch.float16
q = torch.randn(8, 16, 32, 96, device=dev, dtype=dt)
k = torch.randn(8, 8192, 8, 96, device=dev, dtype=dt); v = torch.randn_like(k)
c = lambda: fl.attention_with_kvcache(q, k, v, causal=True, kernel=kern)
c(); c(); torch.cuda.synchronize()
torch.cuda.profiler.start(); c(); torch.cuda.synchronize(); torch.cuda.profiler.stop()
print("done", kern)
