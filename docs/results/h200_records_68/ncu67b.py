# One call each of rung 66, rung 67, SDPA cuDNN and flash at d = 96, GQA 32/8, B = 1, Nq = 1, Nk from argv, for ncu.
import os, sys, torch
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import flash_ladder as fl
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
nk = int(sys.argv[1]); B = int(sys.argv[2]) if len(sys.argv) > 2 else 1
torch.manual_seed(0); dev = "cuda"; dt = torch.float16
q = torch.randn(B, 1, 32, 96, device=dev, dtype=dt)
k = torch.randn(B, nk, 8, 96, device=dev, dtype=dt); v = torch.randn_like(k)
qv, kv, vv = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
def cudnn():
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        return F.scaled_dot_product_attention(qv, kv, vv, enable_gqa=True)
def flash():
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        return F.scaled_dot_product_attention(qv, kv, vv, enable_gqa=True)
calls = [
         lambda: fl.attention_with_kvcache(q, k, v, causal=False, kernel=67), cudnn, flash]
for c in calls: c(); c()
torch.cuda.synchronize()
torch.cuda.profiler.start()
for c in calls: c()
torch.cuda.synchronize()
torch.cuda.profiler.stop()
print("done", nk, B)
