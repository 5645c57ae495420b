# Where a decode call's time goes in the timed loop: CUDA events as decode_bench times them
# (the L2 flushed before each call, by writing zeros as compare_sdpa does, or by reading), and
# the kernels' own start and end from CUPTI (torch.profiler) in the same loop, rungs A and B
# alternating, eager and in a CUDA graph.
import json, math, os, statistics, sys, tempfile
import torch
sys.path.insert(0, "scripts"); sys.path.insert(0, "python")
import compare_sdpa as cs
import flash_ladder
from torch.profiler import profile, ProfilerActivity

lib = cs.Ladder(os.environ["FLASH_LADDER_LIB"])
rungs = [int(x) for x in sys.argv[1].split(",")]
shapes = [tuple(int(x) for x in s.split(":")) for s in sys.argv[2].split(",")]  # d:B:Nq:Nk:Hq:Hkv
rounds, reps = int(sys.argv[3]), int(sys.argv[4])
outdir = sys.argv[5]
l2 = torch.cuda.get_device_properties(0).L2_cache_size
zbuf = torch.empty(2 * l2, dtype=torch.uint8, device="cuda")
rbuf = torch.ones(2 * l2 // 2, dtype=torch.float16, device="cuda")
_z = lambda: zbuf.zero_()
_r = lambda: torch.ops.aten.sum.default(rbuf, dtype=torch.float32)
flushes = {"zero": _z, "read": _r}
if os.environ.get("FOUR"):
    flushes["zero+read"] = lambda: (_z(), _r())
    flushes["read+zero"] = lambda: (_r(), _z())

def timed(fn, flush, n):
    pairs = []
    for _ in range(n):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        flush(); s.record(); fn(); e.record(); pairs.append((s, e))
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in pairs) * 1e3

results = []
for (d, B, nq, nk, hq, hkv) in shapes:
    g = torch.Generator(device="cuda").manual_seed(nk + d)
    q = torch.randn(B, nq, hq, d, device="cuda", dtype=torch.float16, generator=g)
    k = torch.randn(B, nk, hkv, d, device="cuda", dtype=torch.float16, generator=g)
    v = torch.randn(B, nk, hkv, d, device="cuda", dtype=torch.float16, generator=g)
    o = torch.empty_like(q)
    params = flash_ladder.make_params(q, k, v, o, causal=nq > 1, scale=1 / math.sqrt(d), layout="bnhd")
    calls = {}
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.attention.bias import causal_lower_right
    qv, kv, vv = (t.transpose(1, 2) for t in (q, k, v))
    mask = causal_lower_right(nq, nk) if nq > 1 else None
    def sdpa(backend):
        def call():
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(qv, kv, vv, attn_mask=mask, enable_gqa=True)
        return call
    for r in rungs:
        run = (lambda r=r: lib.run(r, params)) if r > 0 else sdpa(
            SDPBackend.CUDNN_ATTENTION if r == -1 else SDPBackend.FLASH_ATTENTION)
        try:
            run(); torch.cuda.synchronize()
        except Exception as e:
            print(f"skip {r}: {str(e).splitlines()[0][:100]}"); continue
        calls[(r, "eager")] = run
        calls[(r, "graph")] = cs.captured(run)[0]
    label = f"d={d} B={B} Nq={nq} Nk={nk} {hq}/{hkv}"
    # warm-up
    for key, fn in calls.items():
        timed(fn, flushes["zero"], 20)
    ev = {(key, f): [] for key in calls for f in flushes}
    order = [(key, f) for key in calls for f in flushes]
    for rd in range(rounds):
        for key, f in (reversed(order) if rd % 2 else order):
            ev[(key, f)].append(timed(calls[key], flushes[f], reps))
    # CUPTI: the kernels of each (rung, mode, flush) in the same kind of loop
    traces = {}
    for key, f in order:
        if os.environ.get("NOPROF"):
            traces[(key, f)] = {"calls": 0, "span_us": None, "gap_after_flush_us": None, "kernels": {}}
            continue
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            timed(calls[key], flushes[f], reps)
        path = os.path.join(tempfile.gettempdir(), "t.json")
        prof.export_chrome_trace(path)
        evs = [e for e in json.load(open(path))["traceEvents"] if e.get("cat") == "kernel"]
        evs.sort(key=lambda e: e["ts"])
        # split the stream into calls: each flush kernel starts one
        isflush = lambda e: ("zero" in e["name"].lower() or "fill" in e["name"].lower() or "reduce" in e["name"].lower())
        groups, cur, fl_end = [], None, None
        for e in evs:
            if isflush(e):
                if cur: groups.append(cur)
                cur = {"flush_end": e["ts"] + e["dur"], "k": []}
            elif cur is not None:
                cur["k"].append(e)
        if cur: groups.append(cur)
        per = {}
        spans, gaps = [], []
        for gr in groups:
            if not gr["k"]: continue
            st = min(e["ts"] for e in gr["k"]); en = max(e["ts"] + e["dur"] for e in gr["k"])
            spans.append(en - st); gaps.append(st - gr["flush_end"])
            for i, e in enumerate(gr["k"]):
                nm = e["name"].split("<")[0].split("(")[0][-40:]
                per.setdefault((i, nm), {"dur": [], "start": []})
                per[(i, nm)]["dur"].append(e["dur"]); per[(i, nm)]["start"].append(e["ts"] - st)
        traces[(key, f)] = {"calls": len(groups), "span_us": statistics.median(spans) if spans else None,
                            "gap_after_flush_us": statistics.median(gaps) if gaps else None,
                            "kernels": {f"{i}:{nm}": {"dur_us": statistics.median(v["dur"]),
                                                      "start_us": statistics.median(v["start"]), "n": len(v["dur"])}
                                        for (i, nm), v in per.items()}}
    for (key, f) in order:
        t = traces[(key, f)]
        res = dict(shape=label, rung=key[0], mode=key[1], flush=f, event_us=statistics.median(ev[(key, f)]),
                   event_rounds=ev[(key, f)], **t)
        results.append(res)
        ks = "; ".join(f"{n} {v['dur_us']:.2f}@{v['start_us']:.2f}" for n, v in t["kernels"].items())
        print(f"{label:32} r{key[0]} {key[1]:5} {f:4} ev {res['event_us']:7.2f} span {t['span_us'] or 0:7.2f} "
              f"gap {t['gap_after_flush_us'] or 0:6.2f} | {ks}", flush=True)
    del q, k, v, o, calls
    torch.cuda.empty_cache()
json.dump(dict(gpu=torch.cuda.get_device_name(0), torch=torch.__version__, results=results),
          open(os.path.join(outdir, "trace.json"), "w"), indent=1)
