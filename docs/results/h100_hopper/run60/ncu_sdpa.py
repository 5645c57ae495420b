# Scratch: one PyTorch SDPA backend at fp16, B=4, H=16, N=4096, d=128, for ncu (3 launches).
import math, os, torch, torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
be = {"cudnn": SDPBackend.CUDNN_ATTENTION, "fa2": SDPBackend.FLASH_ATTENTION}[os.environ["BE"]]
causal = os.environ.get("CAUSAL", "0") == "1"
q, k, v = (torch.randn(4, 16, 4096, 128, device="cuda", dtype=torch.float16) for _ in range(3))
torch.cuda.synchronize()
with sdpa_kernel(be):
    for _ in range(3):
        o = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=1 / math.sqrt(128))
torch.cuda.synchronize()
print("ok", os.environ["BE"], o.float().abs().mean().item())
