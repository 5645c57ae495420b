# docs/results/h200_decode_73_table_ahead.json from runs 12 (r58.sh, Nsight Compute) and 13 (r59.sh).
import json, os, re
R = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')
def rows(path):
    out = []
    for r in json.load(open(os.path.join(R, path)))['rows']:
        out.append([r['arm'].replace(' 74', ' trial'), r['B'], r['Nk'], round(r['ms'] * 1000, 2), round(r['gbps'], 1)])
    return out
ncu = {}
cur = None
for line in open(os.path.join(R, 'run12', 'brief.txt')):
    m = re.match(r'== (\S+) set', line)
    if m: cur = m.group(1); ncu.setdefault(cur, {}); continue
    parts = line.split()
    if cur and parts and ('__' in parts[0]):
        ncu[cur][parts[0]] = float(parts[-1].replace(',', ''))
doc = {
 'gpu': 'NVIDIA H200', 'driver': '580.159.04', 'torch': '2.11.0+cu130', 'nvcc': '13.0', 'date': '2026-11-29', 'flush': 'reads',
 'note': ("The paged one-row cells (GQA 32/8, one query row, d = 128, each sequence's length uniform in [Nk / 4, Nk]). "
          "Run 12, Nsight Compute on rung 73 (one call each, the GPU's own clocks; B = 8, Nk = 32768): the contiguous cache, "
          "pages of 64 and of 256 in order, pages of 64 shuffled ('ncu (run 12)': metric -> value per arm). Run 13: rung 73 "
          "beside a trial built from it on the device (never a rung) whose tile copies, each time they read the block "
          "table's entry, prefetch into the L1 the entry 32 ahead (one 128-byte line of entries), CUDA graphs, 5 balanced "
          "rounds of 20 calls; rows [arm, B, Nk, us, GB/s of the keys each sequence holds]."),
 'commands': {'run 12': 'ncu --profile-from-start off --clock-control none -k regex:decode_kernel --metrics <the two sets in the records> python3 ncu_paged.py <arm> 73',
              'run 13': 'python3 scripts/paged_bench.py --kernels 73,<trial> --nq 1 --d 128 --ragged --pages 64,256 --in-order --rounds 5 with --b 8 --nk 32768 (two processes) and --b 1 --nk 131072'},
 'ncu (run 12)': ncu,
 'series': {'run 13, B = 8, first process': rows('run13/j/b8a.json'), 'run 13, B = 8, second process': rows('run13/j/b8b.json'),
            'run 13, B = 1': rows('run13/j/b1.json')},
}
json.dump(doc, open(os.path.join(R, '..', 'h200_decode_73_table_ahead.json'), 'w'), separators=(',', ':'))
print('ok', {k: len(v) for k, v in ncu.items()})
