import json
p='/work/main/docs/results/h200_decode_73.json'
d=json.load(open(p))
def series(path):
    out = {}
    for r in json.load(open(path))['rows']:
        out.setdefault(r['impl'], []).append([f"{r['H']}/{r['H_kv']}", r['d'], r['B'], r['Nq'], r['Nk'], round(r['ms'] * 1000, 2)])
    return out
d['series']['run 6, 16 query rows (the rule in its last form)'] = series('/tmp/r53/j/q16c.json')
d['paged, run 5 (the rule\'s first form)'] = [[r['arm'], r['B'], r['Nk'], round(r['ms']*1000,2), round(r['gbps'],1)] for r in json.load(open('/work/.device/5/j/paged73.json'))['rows']]
d['paged, run 6 (the rule in its last form)'] = [[r['arm'], r['B'], r['Nk'], round(r['ms']*1000,2), round(r['gbps'],1)] for r in json.load(open('/tmp/r53/j/paged73b.json'))['rows']]
d['note'] += (" Run 6: rung 73 in its last form (the one split only for calls without cache lengths), another machine; decode_bench "
              "passes no cache lengths, so runs 2, 3 and 6 time the same rule. Paged runs 5 and 6 (rows [arm, B, Nk, us, GB/s], "
              "each sequence's length uniform in [Nk / 4, Nk], d = 128, 16 query rows): rung 73's first form (one split for every call) "
              "and its last (rung 72's count with cache lengths). Six machines in all.")
d['note'] = d['note'].replace(" Four machines.", "")
d['commands']['rung 73 (run 6)'] = "python3 scripts/decode_bench.py --graphs --kernels 72,73 --d 128 --heads 32/8 --nq 16 --b 20,24,28 --nk 8192,32768 --rounds 3 --repeats 20"
d['commands']['paged (runs 5 and 6)'] = "python3 scripts/paged_bench.py --kernels 72,73 --nq 16 --d 128 --ragged --b 20,24 --nk 32768 --pages 64,256 --rounds 3"
json.dump(d, open(p,'w'), separators=(',', ':'))
print(list(d['series']), [k for k in d if k.startswith('paged')])
