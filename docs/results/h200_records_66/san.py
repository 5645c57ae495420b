# compute-sanitizer driver: cache calls of one rung through the package, each checked loosely
# against a float32 reference (the sanitizer is the test; the check catches a wrong launch).
#   python3 san.py RUNG   env: SAN_D (64), SAN_PAGES (0,64,256), SAN_HEADS (32/8,8/8)
import os, sys, math, torch
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import flash_ladder as fl
rung = int(sys.argv[1]); d = int(os.environ.get("SAN_D", "64"))
pages = [int(x) for x in os.environ.get("SAN_PAGES", "0,64,256").split(",")]
heads = [tuple(int(y) for y in x.split("/")) for x in os.environ.get("SAN_HEADS", "32/8,8/8").split(",")]
torch.manual_seed(0); dev = "cuda"; calls = 0; bad = 0
for hq, hkv in heads:
  for nq in (1, 16 // (hq // hkv) if hq // hkv <= 16 else 1):
    for lens in ([523], [1000, 0, 1, 300, 777]):
      for page in pages:
        B = len(lens); cap = 1024
        q = torch.randn(B, nq, hq, d, device=dev, dtype=torch.float16)
        k = torch.randn(B, cap, hkv, d, device=dev, dtype=torch.float16)
        v = torch.randn(B, cap, hkv, d, device=dev, dtype=torch.float16)
        sl = torch.tensor(lens, dtype=torch.int32, device=dev)
        if page:
          npg = cap // page
          perm = torch.randperm(B * npg, device=dev)
          kp = torch.empty(B * npg, page, hkv, d, device=dev, dtype=torch.float16); vp = torch.empty_like(kp)
          kp[perm] = k.reshape(B * npg, page, hkv, d); vp[perm] = v.reshape(B * npg, page, hkv, d)
          bt = perm.reshape(B, npg).to(torch.int32).contiguous()
          o = fl.attention_with_kvcache(q, kp, vp, cache_seqlens=sl, block_table=bt, causal=True, kernel=rung)
        else:
          o = fl.attention_with_kvcache(q, k, v, cache_seqlens=sl, causal=True, kernel=rung)
        torch.cuda.synchronize(); calls += 1
        for b, n in enumerate(lens):
          if n == 0: continue
          qq = q[b].float().transpose(0, 1); g = hq // hkv
          kk = k[b, :n].float().transpose(0, 1).repeat_interleave(g, 0); vv = v[b, :n].float().transpose(0, 1).repeat_interleave(g, 0)
          s = qq @ kk.transpose(1, 2) / math.sqrt(d)
          i = torch.arange(nq, device=dev)[:, None]; j = torch.arange(n, device=dev)[None]
          s = s.masked_fill(j > i + n - nq, float("-inf"))
          ref = torch.nan_to_num((s.softmax(-1) @ vv).transpose(0, 1))
          err = (o[b].float() - ref).abs().max().item()
          if err > 2e-2: bad += 1; print(f"BAD rung {rung} d {d} h {hq}/{hkv} nq {nq} page {page} b {b} err {err}")
print(f"san.py rung {rung} d {d}: {calls} calls, {bad} wrong")
sys.exit(1 if bad else 0)
