#!/usr/bin/env python3
"""Scratch: SM clock and power while each of several rung 23 builds (and cuDNN) runs back to back for a few
seconds, in alternating order (nvidia-smi sampled every 50 ms). python3 power2.py --libs A=..,M2=.. --out DIR"""
import argparse, datetime, json, math, os, statistics, subprocess, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
import compare_sdpa as cs
import torch, torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
ap = argparse.ArgumentParser()
ap.add_argument("--libs", required=True)
ap.add_argument("--out", required=True)
ap.add_argument("--seconds", type=float, default=3.0)
ap.add_argument("--rounds", type=int, default=2)
args = ap.parse_args()
libs = [(x.split("=")[0], cs.Ladder(x.split("=")[1])) for x in args.libs.split(",")]
smi_log = os.path.join(args.out, "smi.csv")
reason = "clocks_event_reasons.active"
if subprocess.run(["nvidia-smi", f"--query-gpu={reason}", "--format=csv"], capture_output=True).returncode:
    reason = "clocks_throttle_reasons.active"
smi = subprocess.Popen(["nvidia-smi", f"--query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,{reason}",
                        "--format=csv,noheader,nounits", "-lms", "50"], stdout=open(smi_log, "w"), stderr=subprocess.STDOUT)
time.sleep(1.0)
windows = []
for (b, n, d) in [(8, 8192, 128), (16, 4096, 128)]:
    q, k, v = (torch.randn(b, 16, n, d, device="cuda", dtype=torch.float16) for _ in range(3))
    scale = 1 / math.sqrt(d)
    fns = {}
    for name, lad in libs:
        o = torch.empty_like(q); p = cs.make_params(q, k, v, o, False, scale)
        fns[name] = (lambda lad=lad, p=p: lad.run(23, p)); fns[name].keep = (o, p)
    def cudnn():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return F.scaled_dot_product_attention(q, k, v, scale=scale)
    fns["cudnn"] = cudnn
    fl = cs.flops(b, 16, n, d, False)
    for r in range(args.rounds):
        order = list(fns.items())
        if r % 2: order.reverse()
        for name, fn in order:
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
            windows.append((f"d={d} N={n} B={b} {name} r{r}", t0 + 0.7, t1, fl / (s.elapsed_time(e) / launches * 1e-3) / 1e12))
    del fns, q, k, v; torch.cuda.empty_cache(); time.sleep(0.5)
time.sleep(0.3); smi.terminate(); smi.wait()
samples = []
for line in open(smi_log):
    try:
        f = [x.strip() for x in line.split(",")]
        samples.append((datetime.datetime.strptime(f[0], "%Y/%m/%d %H:%M:%S.%f").timestamp(), float(f[1]), float(f[2]), float(f[3]), f[4]))
    except Exception: pass
rows = []
print(f"{'back to back':<32} {'TFLOP/s':>8} {'SM MHz':>7} {'W':>6}  TFLOP/s per GHz")
for tag, a, z, tf in windows:
    ss = [x for x in samples if a <= x[0] <= z]
    if not ss: print(tag, "no samples"); continue
    mhz = statistics.median(x[1] for x in ss); w = statistics.median(x[2] for x in ss)
    reasons = {}
    for x in ss: reasons[x[4]] = reasons.get(x[4], 0) + 1
    rows.append(dict(tag=tag, tflops=tf, mhz=mhz, watts=w, reasons=reasons, samples=len(ss)))
    print(f"{tag:<32} {tf:8.1f} {mhz:7.0f} {w:6.1f}  {tf / mhz * 1e3:6.1f}  {reasons}")
json.dump(rows, open(os.path.join(args.out, "power2.json"), "w"), indent=1)
