# Rung 72 against 73 outside decode_bench: eager calls timed by CUDA events, 20 back to back
# (no flush) or each after a read of 2x the L2 (flush), five alternating rounds; median us.
import os, sys, statistics, torch
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import flash_ladder as fl
torch.manual_seed(0)
buf = torch.empty(2 * 60 * 2**20 // 4, device="cuda", dtype=torch.float32).fill_(1)
for b, nk in ((20, 8192), (24, 32768), (28, 32768)):
    q = torch.randn(b, 16, 32, 128, device="cuda", dtype=torch.float16)
    k = torch.randn(b, nk, 8, 128, device="cuda", dtype=torch.float16); v = torch.randn_like(k)
    calls = {r: (lambda r=r: fl.attention_with_kvcache(q, k, v, causal=True, kernel=r)) for r in (72, 73)}
    for f in calls.values(): f(); f()
    res = {(r, m): [] for r in calls for m in ("back to back", "flushed")}
    for rnd in range(5):
        order = (72, 73) if rnd % 2 == 0 else (73, 72)
        for r in order:
            s, e = torch.cuda.Event(True), torch.cuda.Event(True)
            torch.cuda.synchronize(); s.record()
            for _ in range(20): calls[r]()
            e.record(); torch.cuda.synchronize()
            res[(r, "back to back")].append(s.elapsed_time(e) * 1000 / 20)
            ts = []
            for _ in range(20):
                buf.sum(); s.record(); calls[r](); e.record(); torch.cuda.synchronize()
                ts.append(s.elapsed_time(e) * 1000)
            res[(r, "flushed")].append(statistics.median(ts))
    for m in ("back to back", "flushed"):
        a, c = statistics.median(res[(72, m)]), statistics.median(res[(73, m)])
        print(f"B={b} Nk={nk} {m}: rung 72 {a:.1f} us, rung 73 {c:.1f} us, 72/73 {a / c:.3f}")
    del q, k, v; torch.cuda.empty_cache()
