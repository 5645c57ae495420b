# Scratch: one PyTorch SDPA backend at fp16 (env BE = cudnn | fa2), B x 16 heads x N x d (env B, N, D, CAUSAL),
# 3 launches, for ncu.
import math, os, torch, torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
be = {"cudnn": SDPBackend.CUDNN_ATTENTION, "fa2": SDPBackend.FLASH_ATTENTION}[os.environ["BE"]]
B, N, D = (int(os.environ.get(k, v)) for k, v in (("B", "16"), ("N", "512"), ("D", "128")))
causal = os.environ.get("CAUSAL", "0") == "1"
q, k, v = (torch.randn(B, 16, N, D, device="cuda", dtype=torch.float16) for _ in range(3))
torch.cuda.synchronize()
with sdpa_kernel(be):
    for _ in range(3):
        o = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=1 / math.sqrt(D))
torch.cuda.synchronize()
print("ok", os.environ["BE"], B, N, D, o.float().abs().mean().item())
