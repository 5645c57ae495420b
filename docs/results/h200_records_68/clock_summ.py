import sys, statistics, datetime
smi = []
for line in open(sys.argv[2]):
    p = [x.strip() for x in line.split(",")]
    try: smi.append((datetime.datetime.strptime(p[0].split(" ")[1], "%H:%M:%S.%f"), float(p[1]), float(p[2]), float(p[3]), p[4]))
    except Exception: pass
for line in open(sys.argv[1]):
    w = line.split(); t0 = datetime.datetime.strptime(w[-2], "%H:%M:%S.%f"); t1 = datetime.datetime.strptime(w[-1], "%H:%M:%S.%f")
    t0 = t0.replace(year=1900); t1 = t1.replace(year=1900)
    sel = [s for s in smi if t0 + datetime.timedelta(seconds=0.3) <= s[0] <= t1]
    if sel:
        print(" ".join(w[:-2]), f"| sm {statistics.median(s[1] for s in sel):.0f} MHz (min {min(s[1] for s in sel):.0f}) mem {statistics.median(s[2] for s in sel):.0f} power {statistics.median(s[3] for s in sel):.0f} W reasons {sorted(set(s[4] for s in sel))} n={len(sel)}")
    else:
        print(" ".join(w[:-2]), "| no samples")
