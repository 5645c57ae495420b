#!/usr/bin/env python3
"""Scratch (run 119): summarise rung 23's %globaltimer trace (build-carry/v119), microseconds.
Per consumer and slot: e7 loop top, e0 item found (item_of, work_of), e1 Q landed, e2 first K landed, e3 first
turn taken, e4 first S done, e5 last P.V done, e6 O packed (pack_o); producer: p0 Q issued, p1 first K issued."""
import sys, statistics as st
def q(v, f):
    v = sorted(v); return v[min(len(v) - 1, int(f * len(v)))] if v else float('nan')
for path in sys.argv[1:]:
    lines = open(path).read().split('\n')
    B, S = {}, []
    for l in lines[1:]:
        f = l.split()
        if not f: continue
        if f[0] == 'b': B[int(f[1])] = [int(x) for x in f[2:5]]
        elif f[0] == 's':
            v = [int(x) for x in f[5:]]
            S.append((int(f[1]), int(f[2]), [int(x) for x in f[3:5]], [v[8 * c: 8 * c + 8] for c in range(len(v) // 8)]))
    ncons = max(sum(1 for e in c if e[3]) for _, _, _, c in S)
    t0 = min(v[0] for v in B.values())
    end = [max(v[1], v[2]) for v in B.values()]
    span = (max(end) - t0) / 1e3
    print(f"== {path.split('/')[-1]}: {lines[0]}; {ncons} consumers")
    print(f"  span {span:.2f} us; ends: min {(min(end) - t0) / 1e3:.2f} median {(st.median(end) - t0) / 1e3:.2f}; idle at the end, mean over blocks {st.mean(span - (e - t0) / 1e3 for e in end):.2f} us")
    by = {}
    for b, s, p, cs in S: by.setdefault(b, []).append((s, p, cs))
    R = {}
    def add(k, x): R.setdefault(k, []).append(x / 1e3)
    for b, items in by.items():
        items.sort()
        for i in range(len(items)):
            s, p, cs = items[i]
            for c in range(ncons):
                e = cs[c]
                if not (e[3] and e[5]): continue
                add(f"c{c} item: first turn -> last P.V done", e[5] - e[3])
                add(f"c{c} first S (e3 -> e4)", e[4] - e[3])
                if e[6]: add(f"c{c} pack_o (e5 -> e6)", e[6] - e[5])
                if i + 1 < len(items):
                    n = items[i + 1][2][c]
                    if n[7] and n[0] and n[3] and e[6]:
                        add(f"c{c} loop tail (e6 -> next e7)", n[7] - e[6])
                        add(f"c{c} item_of + work_of (e7 -> e0)", n[0] - n[7])
                        add(f"c{c} Q wait (e0 -> e1)", n[1] - n[0])
                        add(f"c{c} K wait (e1 -> e2)", n[2] - n[1])
                        add(f"c{c} turn wait (e2 -> e3)", n[3] - n[2])
                        add(f"c{c} last P.V done -> next first turn", n[3] - e[5])
            if i + 1 < len(items):
                last = max(cs[c][5] for c in range(ncons))
                n0 = items[i + 1][2][0][3]
                if last and n0 and all(cs[c][5] for c in range(ncons)):
                    add("tensor idle: every consumer's last P.V done -> c0's next first turn", n0 - last)
    for k in sorted(R, key=lambda k: (k[:2] != 'te', k)):
        v = R[k]
        print(f"  {k:70s} n {len(v):5d} median {st.median(v):6.3f} mean {st.mean(v):6.3f} p10 {q(v, .1):6.3f} p90 {q(v, .9):6.3f}")
