# Scratch: reads smprobe's output, groups the SMs by which lines are near (L2 partition), writes
# the slot orders for the run-117 variants: S (SMs by %smid), P (one partition's SMs, then the other's).
import sys, statistics as st
sm_of_block, lat = [], {}
for line in open(sys.argv[1]):
    f = line.split()
    if f[0] == "sm": sm_of_block.append(int(f[2])); nsm = int(f[3])
    elif f[0] == "lat": lat[int(f[1])] = [int(x) for x in f[2:]]
sms = sorted(lat)
print("blocks", len(sm_of_block), "nsmid", nsm, "smids dense:", sms == list(range(len(sms))))
print("block -> smid:", sm_of_block)
L = len(next(iter(lat.values())))
def corr(a, b):
    ma, mb = st.mean(a), st.mean(b)
    num = sum((x - ma) * (y - mb) for x, y in zip(a, b))
    den = (sum((x - ma) ** 2 for x in a) * sum((y - mb) ** 2 for y in b)) ** 0.5
    return num / den if den else 0.0
ref = lat[sms[0]]
g0 = [s for s in sms if corr(ref, lat[s]) > 0]
g1 = [s for s in sms if s not in g0]
print("group sizes", len(g0), len(g1))
# per line: mean latency from each group
near, far, clean = [], [], 0
for l in range(L):
    a = [lat[s][l] for s in g0]; b = [lat[s][l] for s in g1] if g1 else [0]
    lo, hi = (a, b) if st.mean(a) < st.mean(b) else (b, a)
    near.append(st.median(lo)); far.append(st.median(hi))
    clean += max(lo) < min(hi)
print("latency a hop (cycles): near median %.0f, far median %.0f; lines whose groups separate cleanly: %d of %d" % (st.median(near), st.median(far), clean, L))
print("group0:", g0)
print("group1:", g1)
print("smid -> block:", {s: b for b, s in enumerate(sm_of_block)})
open(sys.argv[2] + "/slots_S.txt", "w").write(",".join(map(str, sms)))
open(sys.argv[2] + "/slots_P.txt", "w").write(",".join(map(str, sorted(g0) + sorted(g1))))
