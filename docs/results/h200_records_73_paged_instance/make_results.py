# Writes docs/results/h200_decode_73_paged_instance.json from this folder's j/*.json (paged_bench)
# and t/ncu_*.txt (Nsight Compute). Run from the repository root.
import json, re
R = 'docs/results/h200_records_73_paged_instance'
names = {'b8a': 'run 14, B = 8, first process', 'b8b': 'run 14, B = 8, second process',
         'b8c': 'run 14, B = 8, 8192 and 131072 keys', 'b1': 'run 14, B = 1'}
arm = lambda a: a.replace(' 74', ' trial 74').replace(' 75', ' trial 75')
series = {}
for k, n in names.items():
    d = json.load(open(f'{R}/j/{k}.json'))
    series[n] = [[arm(r['arm']), r['B'], r['Nk'], round(r['ms'] * 1000, 2), round(r['gbps'], 1)]
                 for r in d['rows']]
ncu = {}
for f in ['shuffled_73', 'shuffled_75', 'shuffled_74', 'contiguous_74']:
    a, r = f.split('_')
    m = ncu.setdefault(f'{a} {"rung 73" if r == "73" else "trial " + r}', {})
    for s in (1, 2):
        for line in open(f'{R}/t/ncu_{f}_{s}.txt'):
            mm = re.match(r'\s+([a-z0-9_]+__[a-z_.0-9]+)\s+(\S+)?\s+([\d,\.]+)\s*$', line)
            if mm:
                m[mm.group(1)] = float(mm.group(3).replace(',', ''))
out = {'gpu': 'NVIDIA H200', 'driver': '580.159.04', 'torch': '2.11.0+cu130', 'nvcc': '13.0',
       'date': '2026-11-29', 'flush': 'reads'}
old = json.load(open('docs/results/h200_decode_73_paged_instance.json'))
out['note'], out['commands'] = old['note'], old['commands']
out['ncu (run 14)'], out['series'] = ncu, series
json.dump(out, open('docs/results/h200_decode_73_paged_instance.json', 'w'), indent=1)
