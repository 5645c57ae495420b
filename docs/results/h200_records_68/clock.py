# SM clock and power while a (rung, flush) loop runs: each phase ~1.5 s of flush + call (graph), events median.
import datetime, math, os, statistics, subprocess, sys, time
import torch
sys.path.insert(0, "scripts"); sys.path.insert(0, "python")
import compare_sdpa as cs
lib = cs.Ladder(os.environ["FLASH_LADDER_LIB"])
log = open(sys.argv[1], "w")
smi = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,clocks_event_reasons.active",
                        "--format=csv,noheader,nounits", "-lms", "20"], stdout=open(sys.argv[2], "w"))
time.sleep(1.0)
fl = {"zeros": cs.Timer(1, 1, 1.0, flush="zeros").flush, "reads": cs.Timer(1, 1, 1.0, flush="reads").flush}
for (d, b, nk) in [(96, 1, 1024), (192, 8, 32768), (96, 1, 8192)]:
    q = torch.randn(b, 1, 32, d, device="cuda", dtype=torch.float16)
    k = torch.randn(b, nk, 8, d, device="cuda", dtype=torch.float16); v = torch.randn_like(k); o = torch.empty_like(q)
    p = cs.flash_ladder.make_params(q, k, v, o, causal=False, scale=1 / math.sqrt(d), layout="bnhd")
    g = {}
    for r in (67, 68):
        run = (lambda r=r: lib.run(r, p)); run(); torch.cuda.synchronize(); g[r] = cs.captured(run)[0]
    for rep in range(2):
        for r in (67, 68):
            for f in ("zeros", "reads"):
                t0 = datetime.datetime.now(); ts = []; end = time.time() + 1.5
                while time.time() < end:
                    pairs = []
                    for _ in range(30):
                        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                        fl[f](); s.record(); g[r](); e.record(); pairs.append((s, e))
                    torch.cuda.synchronize(); ts += [s.elapsed_time(e) * 1e3 for s, e in pairs]
                t1 = datetime.datetime.now()
                print(f"d={d} B={b} Nk={nk} r{r} {f} {statistics.median(ts):.2f} us n={len(ts)} {t0.strftime('%H:%M:%S.%f')} {t1.strftime('%H:%M:%S.%f')}", file=log, flush=True)
smi.terminate(); time.sleep(0.5)
