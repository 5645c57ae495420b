#!/usr/bin/env python3
"""Scratch (run 119): summarise rung 23's %globaltimer trace (build-carry/v119). Times in microseconds.
Per consumer c and slot: e0 item top, e1 Q landed, e2 first K landed, e3 first turn taken, e4 first S done,
e5 last P.V done; producer: p0 Q issued, p1 first K issued; per block: start, each consumer's end."""
import sys, statistics as st
def q(v, f):
    v = sorted(v); return v[min(len(v) - 1, int(f * len(v)))] if v else float('nan')
for path in sys.argv[1:]:
    lines = open(path).read().split('\n')
    head = lines[0]
    B, S = {}, []
    for l in lines[1:]:
        f = l.split()
        if not f: continue
        if f[0] == 'b': B[int(f[1])] = [int(x) for x in f[2:5]]
        elif f[0] == 's': S.append((int(f[1]), int(f[2]), [int(x) for x in f[3:5]], [int(x) for x in f[5:11]], [int(x) for x in f[11:17]]))
    t0 = min(v[0] for v in B.values())
    us = lambda t: (t - t0) / 1000.0
    end = [max(v[1], v[2]) for v in B.values()]
    span = us(max(end))
    print(f"== {path.split('/')[-1]}: {head}")
    print(f"  span {span:.2f} us; block starts spread {us(max(v[0] for v in B.values())):.2f} us; ends: min {us(min(end)):.2f} median {us(st.median(end)):.2f} max {span:.2f}; "
          f"idle at the end, mean over blocks {st.mean(span - us(e) for e in end):.2f} us")
    by = {}
    for b, s, p, c0, c1 in S: by.setdefault(b, []).append((s, p, c0, c1))
    first = {k: [] for k in ('Q landed', 'K landed', 'first S done')}
    rows = {k: [] for k in ('item', 'gap: last PV done -> turn taken', '  Q wait (e1-e0)', '  K wait (e2-e1)', '  turn wait (e3-e2)', 'first S (e4-e3)', 'Q issued before it landed-or-was-needed (e1-p0)', 'K0 issued before turn (e3-p1)')}
    for b, items in by.items():
        items.sort()
        s0, p, c0, c1 = items[0]
        if c0[1]: first['Q landed'].append(us(c0[1]) - us(B[b][0]))
        if c0[2]: first['K landed'].append(us(c0[2]) - us(B[b][0]))
        if c0[4]: first['first S done'].append(us(c0[4]) - us(B[b][0]))
        for c in (2, 3):
            prev = None
            for s, p, *cs in items:
                e = cs[c - 2]
                if not e[3] or not e[5]:
                    prev = None; continue
                rows['item'].append((e[5] - e[3]) / 1000)
                rows['first S (e4-e3)'].append((e[4] - e[3]) / 1000)
                if prev is not None:
                    rows['gap: last PV done -> turn taken'].append((e[3] - prev) / 1000)
                    rows['  Q wait (e1-e0)'].append((e[1] - e[0]) / 1000)
                    rows['  K wait (e2-e1)'].append((e[2] - e[1]) / 1000)
                    rows['  turn wait (e3-e2)'].append((e[3] - e[2]) / 1000)
                    if p[0]: rows['Q issued before it landed-or-was-needed (e1-p0)'].append((e[1] - p[0]) / 1000)
                    if p[1]: rows['K0 issued before turn (e3-p1)'].append((e[3] - p[1]) / 1000)
                prev = e[5]
    print("  first item, from the block's start: " + "; ".join(f"{k} median {st.median(v):.2f} max {max(v):.2f}" for k, v in first.items() if v))
    for k, v in rows.items():
        if v: print(f"  {k:50s} n {len(v):5d} median {st.median(v):7.3f} mean {st.mean(v):7.3f} p10 {q(v, .1):7.3f} p90 {q(v, .9):7.3f}")
