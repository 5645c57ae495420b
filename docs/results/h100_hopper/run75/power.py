#!/usr/bin/env python3
"""Scratch: (A) the SM clock, power and throttle reasons while rung 23, cuDNN and FA2 run
back to back for a few seconds (nvidia-smi sampled in the background); (B) the sweep's event
time (compare_sdpa.Timer: flush, events) against the kernels' own durations (torch.profiler,
CUPTI) at small N. python3 power.py --lib build/libflash_ladder.so --out DIR"""
import argparse, datetime, json, math, os, statistics, subprocess, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
import compare_sdpa as cs
import torch, torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import profile, ProfilerActivity

ap = argparse.ArgumentParser()
ap.add_argument("--lib", required=True)
ap.add_argument("--out", required=True)
ap.add_argument("--seconds", type=float, default=3.0)
args = ap.parse_args()
lad = cs.Ladder(args.lib)
smi_log = os.path.join(args.out, "smi.csv")
reason = "clocks_event_reasons.active"
if subprocess.run(["nvidia-smi", f"--query-gpu={reason}", "--format=csv"], capture_output=True).returncode:
    reason = "clocks_throttle_reasons.active"
smi = subprocess.Popen(["nvidia-smi", f"--query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,{reason}",
                        "--format=csv,noheader,nounits", "-lms", "50"],
                       stdout=open(smi_log, "w"), stderr=subprocess.STDOUT)
time.sleep(1.0)


def impls_for(b, h, n, d, causal):
    g = torch.Generator(device="cuda").manual_seed(1234 + n)
    q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.float16, generator=g) for _ in range(3))
    scale = 1 / math.sqrt(d)
    o = torch.empty_like(q)
    p = cs.make_params(q, k, v, o, causal, scale)

    def sdpa(be):
        def f():
            with sdpa_kernel(be):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
        return f
    return {"r23": lambda: lad.run(23, p), "cudnn": sdpa(SDPBackend.CUDNN_ATTENTION),
            "fa2": sdpa(SDPBackend.FLASH_ATTENTION)}, (q, k, v, o, p)


windows, rows = [], []
# (A) sustained
for (b, n, d, causal) in [(8, 8192, 128, False), (16, 1024, 128, False), (8, 8192, 128, True),
                          (8, 8192, 64, False)]:
    fns, keep = impls_for(b, 16, n, d, causal)
    fl = cs.flops(b, 16, n, d, causal)
    for name, fn in fns.items():
        for _ in range(3): fn()
        torch.cuda.synchronize()
        t0 = time.time(); launches = 0
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        while time.time() - t0 < args.seconds:
            for _ in range(4): fn()
            launches += 4
            if launches % 64 == 0: torch.cuda.synchronize()
        e.record(); e.synchronize(); t1 = time.time()
        ms = s.elapsed_time(e) / launches
        tag = f"d={d} N={n} B={b}{' causal' if causal else ''} {name}"
        windows.append((tag, t0 + 0.7, t1, fl / (ms * 1e-3) / 1e12))
    del fns, keep; torch.cuda.empty_cache(); time.sleep(0.5)
time.sleep(0.3)
smi.terminate(); smi.wait()


def parse(line):
    f = [x.strip() for x in line.split(",")]
    ts = datetime.datetime.strptime(f[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
    return ts, float(f[1]), float(f[2]), float(f[3]), f[4]


samples = []
for line in open(smi_log):
    try: samples.append(parse(line))
    except Exception: pass
print(f"{'sustained, back to back':<34} {'TFLOP/s':>8} {'SM MHz':>7} {'W':>6} {'C':>4}  reasons (samples)")
for tag, a, z, tf in windows:
    ss = [x for x in samples if a <= x[0] <= z]
    if not ss: print(tag, "no samples"); continue
    reasons = {}
    for x in ss: reasons[x[4]] = reasons.get(x[4], 0) + 1
    row = dict(tag=tag, tflops=tf, mhz=statistics.median(x[1] for x in ss), watts=statistics.median(x[2] for x in ss),
               temp=statistics.median(x[3] for x in ss), reasons=reasons, samples=len(ss))
    rows.append(row)
    print(f"{tag:<34} {tf:8.1f} {row['mhz']:7.0f} {row['watts']:6.1f} {row['temp']:4.0f}  {reasons}")

# (B) event time vs kernel time, the sweep's timer
timer = cs.Timer(3, 15, 1.0)
evrows = []
print(f"\n{'event vs kernel (flush, events)':<34} {'event us':>9} {'kernel us':>9}  kernel")
for (b, n, d) in [(16, 512, 128), (16, 1024, 128), (16, 2048, 128)]:
    fns, keep = impls_for(b, 16, n, d, False)
    for name in ["cudnn", "r23", "cudnn", "r23"]:
        fn = fns[name]
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            ms, reps = timer.time(fn)
        durs = {}
        for ev in prof.events():
            if ev.device_type == torch.autograd.DeviceType.CUDA:
                durs.setdefault(ev.name, []).append(ev.device_time)
        main = max((k_ for k_ in durs if "elementwise" not in k_ and "fill" not in k_.lower()),
                   key=lambda k_: sum(durs[k_]), default=None)
        ku = statistics.median(durs[main]) if main else float("nan")
        others = {k_[:40]: len(v_) for k_, v_ in durs.items() if k_ != main}
        tag = f"d={d} N={n} B={b} {name}"
        print(f"{tag:<34} {ms * 1e3:9.1f} {ku:9.1f}  {main[:60] if main else None} others {others}")
        evrows.append(dict(tag=tag, event_us=ms * 1e3, kernel_us=ku, kernel=main, others=others))
    del fns, keep; torch.cuda.empty_cache()
json.dump(dict(sustained=rows, event_vs_kernel=evrows), open(os.path.join(args.out, "power.json"), "w"), indent=1)
