# Prints us a call for each impl in the decode_bench JSON files given, one line a shape.
import json, sys
rows = {}
impls = []
for p in sys.argv[1:]:
    try: d = json.load(open(p))
    except Exception as e: print('skip', p, e); continue
    tag = p.split('/')[-1].replace('.json', '')
    for r in d['rows']:
        impl = r['impl']
        if impl not in impls: impls.append(impl)
        rows.setdefault((tag, r['H'], r['H_kv'], r['B'], r['Nq'], r['Nk']), {})[impl] = r['ms'] * 1000
short = {i: i[:8] for i in impls}
print('tag H/Hkv B Nq Nk | ' + ' '.join(f'{short[i]:>8}' for i in impls))
for k, v in rows.items():
    print(f'{k[0]} {k[1]}/{k[2]} {k[3]} {k[4]} {k[5]} | ' + ' '.join(f'{v[i]:8.2f}' if i in v else '       -' for i in impls))
