# Rung 74's calls for compute-sanitizer, each against rung 73's output, bit for bit: GQA 32/8 with
# 16 query rows (64-row blocks), capacity 2048; d = 96 at B = 20 (one split) and B = 4 (splits,
# the combine) and d = 64 at B = 24 and 2 (the overlapped loop), the contiguous cache, shuffled
# pages of 64 (TMA) and of 16 (runs, cp.async), with and without ragged cache lengths; d = 128 at
# B = 2 (rung 73's code). Exit 1 if one differs.
import os, sys, torch
here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "python")); sys.path.insert(0, os.path.join(here, "..", "scripts"))
import flash_ladder as fl
from paged_bench import paged_copy
gen = torch.Generator(device="cpu").manual_seed(7)
bad = 0
for d, bs in ((96, (20, 4)), (64, (24, 2)), (128, (2,))):
    for b in bs:
        q = torch.randn(b, 16, 32, d, generator=gen).half().cuda()
        k = torch.randn(b, 2048, 8, d, generator=gen).half().cuda()
        v = torch.randn(b, 2048, 8, d, generator=gen).half().cuda()
        lens = torch.randint(0, 2049, (b,), generator=gen, dtype=torch.int32).cuda()
        calls = [("contiguous", (q, k, v), {}), ("contiguous, lengths", (q, k, v), {"cache_seqlens": lens})]
        for page in (64, 16):
            kp, vp, table = paged_copy(k, v, page, gen)
            calls += [(f"pages of {page}", (q, kp, vp), {"block_table": table}),
                      (f"pages of {page}, lengths", (q, kp, vp), {"block_table": table, "cache_seqlens": lens})]
        for name, args, kw in calls:
            want = fl.attention_with_kvcache(*args, causal=True, kernel=73, **kw)
            got = fl.attention_with_kvcache(*args, causal=True, kernel=74, **kw)
            torch.cuda.synchronize()
            same = torch.equal(got, want)
            bad += not same
            print(f"d={d} B={b} {name}: {'bit for bit' if same else 'DIFFERS %.3g' % (got.float() - want.float()).abs().max().item()}")
print("calls wrong:", bad)
sys.exit(1 if bad else 0)
