# One paged call for ncu: GQA 32/8, one query row, d = 128, B = 8, Nk = 32768, ragged lengths
# as paged_bench draws them; argv[1]: contiguous | in_order | shuffled (pages of 64) | in_order_256 |
# shuffled_256; argv[2]: rung.
import os, sys, torch
here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "python")); sys.path.insert(0, os.path.join(here, "..", "scripts"))
import flash_ladder as fl
from paged_bench import paged_copy
how = sys.argv[1]; rung = int(sys.argv[2]); b_arg = int(sys.argv[3]) if len(sys.argv) > 3 else 8
gen = torch.Generator(device="cpu").manual_seed(11)
b, nk, d = b_arg, 32768, 128
q = torch.randn(b, 1, 32, d, generator=gen).half().cuda()
k = torch.randn(b, nk, 8, d, generator=gen).half().cuda()
v = torch.randn(b, nk, 8, d, generator=gen).half().cuda()
lens = torch.randint(nk // 4, nk + 1, (b,), generator=gen, dtype=torch.int32).cuda()
if how == "contiguous":
    c = lambda: fl.attention_with_kvcache(q, k, v, cache_seqlens=lens, causal=False, kernel=rung)
else:
    page = 256 if how.endswith("_256") else 64
    kp, vp, table = paged_copy(k, v, page, gen, "shuffled" if how.startswith("shuffled") else "in order")
    c = lambda: fl.attention_with_kvcache(q, kp, vp, cache_seqlens=lens, block_table=table,
                                          causal=False, kernel=rung)
c(); c(); torch.cuda.synchronize()
torch.cuda.profiler.start(); c(); torch.cuda.synchronize(); torch.cuda.profiler.stop()
print("done", how, rung)
