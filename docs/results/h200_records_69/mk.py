import json, glob
def load(files):
    out = {}
    for f in files:
        d = json.load(open(f))
        for r in d['rows']:
            imp = r['impl']
            out.setdefault(imp, []).append([f"{r['H']}/{r['H_kv']}", r['B'], r['Nq'], r['Nk'], round(r['ms']*1000, 2)])
    return out, d
series = {}
meta = None
for tag, run, proc in [('run 2 (first rule), first process','run2','a'),('run 2 (first rule), second process','run2','b'),
                       ('run 3, first process','run3','a'),('run 3, second process','run3','b')]:
    s, meta = load(sorted(glob.glob(f'docs/results/h200_records_69/{run}/j/{proc}*.json')))
    series[tag] = s
doc = {
 'gpu': meta['gpu'], 'driver': '580.159.04', 'torch': meta['torch'], 'nvcc': '13.0', 'date': '2026-11-29', 'flush': meta['flush'],
 'note': ("Rung 69 against rung 68 (built together), GQA 32/8 at d = 128, fp16, CUDA graphs, balanced rounds (9), "
          "each figure the median of its rounds' medians of 30 calls; SDPA flash and cuDNN (enable_gqa=True) and the read ceiling "
          "(hbm_read_ceiling: torch's sum over the same K and V) in the same process. Rows [H_q/H_kv, B, Nq, Nk, us] under each impl; "
          "Nq = 16 rows causal (bottom-right). Each command ran in two processes on one machine (first, second). "
          "Run 2 built rung 69 as first written: it also took the two-slot count where that count is one split (B = 20, 24; "
          "160 and 192 blocks); run 3 built the rung as kept, which takes it only where it splits the keys; the run 2 rows of "
          "other shapes have the same counts in both."),
 'commands': {
   'run 2': "python3 scripts/decode_bench.py --graphs --kernels 68,69 --d 128 --heads 32/8 --rounds 9 --repeats 30 with --nq 16 and "
            "(--b 1,2 --nk 8192,16384,32768), (--b 1,8 --nk 131072), (--b 4,8,16 --nk 4096,8192,32768), (--b 20,24,48 --nk 8192,32768), "
            "(--b 64 --nk 8192); and --nq 1 --b 1,8 --nk 32768",
   'run 3': "the same with --nq 16 and (--b 12,18,40,48 --nk 8192,32768), (--b 20,24 --nk 8192), (--b 4,8 --nk 8192)"},
 'series': series}
json.dump(doc, open('docs/results/h200_decode_69.json','w'), indent=1)
# table
def idx(s):
    return {imp: {tuple(r[:4]): r[4] for r in rows} for imp, rows in s.items()}
for tag, s in series.items():
    I = idx(s)
    print(tag)
    for key in I['68_decode_copy_steps']:
        a = I['68_decode_copy_steps'][key]; b = I['69_decode_rows_two'][key]; c = I['hbm_read_ceiling'][key]
        peer = min(I['sdpa_flash'].get(key, 1e9), I['sdpa_cudnn'].get(key, 1e9))
        print(f"  {key}  68 {a:8.2f} 69 {b:8.2f}  x{a/b:.3f}  ceil68 {100*c/a:5.1f}% ceil69 {100*c/b:5.1f}%  vs peer {peer/b:.2f}")
