# Rung 73's calls for compute-sanitizer: GQA 32/8, 16 query rows, d = 128, B = 20 and 24 (one
# split past the SMs on 132 SMs without cache lengths), capacity 2048, the contiguous cache and
# shuffled pages of 64, each without cache lengths (moved) and with ragged ones (rung 72's
# count); each checked against rung 72's output (2e-2). Exit 1 if one differs.
import os, sys, torch
here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "python")); sys.path.insert(0, os.path.join(here, "..", "scripts"))
import flash_ladder as fl
from paged_bench import paged_copy
gen = torch.Generator(device="cpu").manual_seed(5)
bad = 0
for b in (20, 24):
    q = torch.randn(b, 16, 32, 128, generator=gen).half().cuda()
    k = torch.randn(b, 2048, 8, 128, generator=gen).half().cuda()
    v = torch.randn(b, 2048, 8, 128, generator=gen).half().cuda()
    lens = torch.randint(0, 2049, (b,), generator=gen, dtype=torch.int32).cuda()
    kp, vp, table = paged_copy(k, v, 64, gen)
    for name, args, kw in (("contiguous", (q, k, v), {}), ("pages of 64", (q, kp, vp), {"block_table": table}),
                           ("contiguous, lengths", (q, k, v), {"cache_seqlens": lens}),
                           ("pages of 64, lengths", (q, kp, vp), {"block_table": table, "cache_seqlens": lens})):
        want = fl.attention_with_kvcache(*args, causal=True, kernel=72, **kw)
        got = fl.attention_with_kvcache(*args, causal=True, kernel=73, **kw)
        torch.cuda.synchronize()
        err = (got.float() - want.float()).abs().max().item()
        bad += not err <= 2e-2
        print(f"B={b} {name}: max |rung 73 - rung 72| {err:.3g}")
print("calls wrong:", bad)
sys.exit(1 if bad else 0)
