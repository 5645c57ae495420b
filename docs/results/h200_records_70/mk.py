# Writes docs/results/h200_decode_70.json from the runs' j/ folders and prints the ratios
# (python3 docs/results/h200_records_70/mk.py, from the repository root).
import glob, json, re
R = 'docs/results/h200_records_70'
D = {'1': 128, '2': 128, '3': 64, '4': 128}  # the head dim of each bench file a1-a3, b1-b4


def load(files):
    out = {}
    for f in files:
        d = D[f.split('/')[-1][1]]
        for r in json.load(open(f))['rows']:
            out.setdefault(r['impl'], []).append(
                [f"{r['H']}/{r['H_kv']}", d, r['B'], r['Nq'], r['Nk'], round(r['ms'] * 1000, 2)])
    return out


series = {
    'run 1 (first build: Q from registers, no proxy fence; d = 64 wrong)': load(sorted(glob.glob(f'{R}/run1/j/a*.json'))),
    'run 2 (Q from registers, proxy fence; d = 64 wrong)': load(sorted(glob.glob(f'{R}/run2/j/a*.json'))),
    'run 3 (the rung as kept), first process': load(sorted(glob.glob(f'{R}/run3/j/a*.json'))),
    'run 4 (the rung as kept), second process': load(sorted(glob.glob(f'{R}/run4/j/b*.json'))),
}
paged = json.load(open(f'{R}/run4/j/paged.json'))
doc = {
    'gpu': paged['gpu'], 'driver': '580.159.04', 'torch': paged['torch'], 'nvcc': '13.0',
    'date': '2026-11-29', 'flush': paged['flush'],
    'note': ("Rung 70 against rung 69 (built together), GQA 32/8 with 16 query rows (causal, "
             "bottom-right), fp16, CUDA graphs, balanced rounds (5), each figure the median of its "
             "rounds' medians of 30 calls; SDPA flash and cuDNN (enable_gqa=True) and the read "
             "ceiling (hbm_read_ceiling: torch's sum over the same K and V) in the same process. "
             "Rows [H_q/H_kv, d, B, Nq, Nk, us] under each impl. Runs 1 and 2 built rung 70 with Q "
             "as registers (wgmma's RS form for S), which ptxas compiled wrongly at d = 64: their "
             "d = 64 rows time a wrong kernel and their d = 128 rows a kernel that passed its "
             "tests. Runs 3 and 4 are the rung as kept (Q from shared memory), on two machines."),
    'commands': {
        'decode': "python3 scripts/decode_bench.py --graphs --kernels 69,70 --heads 32/8 --nq 16 "
                  "--rounds 5 --repeats 30 with (--d 128 --b 1,4,8,12,16 --nk 8192,32768), "
                  "(--d 128 --b 20,24,32,48,64 --nk 8192), (--d 64 --b 4,16,48 --nk 8192,32768); "
                  "run 4 also (--d 128 --b 1,2 --nk 131072)",
        'paged': "python3 scripts/paged_bench.py --kernels 69,70 --nq 16 --ragged --b 4,8,12 "
                 "--nk 32768 --pages 64,256 --rounds 5 (run 4)"},
    'series': series,
    'paged (run 4)': [[r['arm'], r['B'], r['Nk'], round(r['ms'] * 1000, 2), round(r['gbps'], 1)]
                      for r in paged['rows']],
}
text = json.dumps(doc, indent=1)
# One row a line: the innermost lists of scalars written flat.
text = re.sub(r'\[\n\s+([^\[\]{}]*?)\n\s+\]', lambda m: '[' + ' '.join(m.group(1).split()) + ']', text)
open('docs/results/h200_decode_70.json', 'w').write(text + '\n')


def idx(s):
    return {imp: {tuple(r[:5]): r[5] for r in rows} for imp, rows in s.items()}


for tag, s in series.items():
    I = idx(s)
    print(tag)
    for key, a in I['69_decode_rows_two'].items():
        b = I['70_decode_rows_wgmma'][key]
        c = I['hbm_read_ceiling'][key]
        peer = min(I['sdpa_flash'][key], I['sdpa_cudnn'][key])
        print(f"  {key}  69 {a:8.2f} 70 {b:8.2f}  x{a / b:.3f}  ceiling: 69 {100 * c / a:5.1f}% "
              f"70 {100 * c / b:5.1f}%  peer/70 {peer / b:.2f}")
