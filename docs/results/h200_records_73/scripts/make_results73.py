# docs/results/h200_decode_73.json from the four device runs after rung 72 (r48-r51).
import json, os
def series(path, rename=None):
    out = {}
    for r in json.load(open(path))['rows']:
        impl = (rename or {}).get(r['impl'], r['impl'])
        out.setdefault(impl, []).append([f"{r['H']}/{r['H_kv']}", r['d'], r['B'], r['Nq'], r['Nk'], round(r['ms'] * 1000, 2)])
    return out
probes = {'73_trial_one_split_two': 'probe: one split, two an SM (rung 73 as kept)',
          '74_trial_two_splits_two': 'probe: two splits, two an SM'}
paged = json.load(open('/tmp/r49/j/paged.json'))['rows']
doc = {
 'gpu': 'NVIDIA H200', 'driver': '580.159.04', 'torch': '2.11.0+cu130', 'nvcc': '13.0', 'date': '2026-11-29', 'flush': 'reads',
 'note': ("Rung 73 against rung 72 (built together), GQA 32/8, d = 128, fp16, CUDA graphs, balanced rounds (3 of 20 calls), "
          "each figure the median of its rounds' medians; SDPA flash and cuDNN (enable_gqa=True) and the read ceiling "
          "(hbm_read_ceiling: torch's sum over the same K and V) in the same process. Rows [H_q/H_kv, d, B, Nq, Nk, us] under "
          "each impl; Nq > 1 causal (bottom-right). Run 2 (trial): rung 72 beside two probes built from it (never rungs): "
          "the one-split count taken past the SMs (rung 73's rule) and two splits at two an SM there. Run 3: rung 73 as "
          "committed, two processes (16 query rows) and one of 8 query rows. Run 2 also timed the paged one-row calls of "
          "rung 72 beside probe 75 (the block table held 32 entries a warp): rows [arm, B, Nk, us, GB/s], each sequence's "
          "length uniform in [Nk / 4, Nk] (notebook 72). Four machines."),
 'commands': {
  'trial (run 2)': "python3 scripts/decode_bench.py --graphs --kernels 72,73,74 --d 128 --heads 32/8 --nq 16 --b 20,24,28 --nk 8192,32768 --rounds 3 --repeats 20 (73, 74: the probes)",
  'rung 73 (run 3)': "python3 scripts/decode_bench.py --graphs --kernels 72,73 --d 128 --heads 32/8 --rounds 3 --repeats 20 with (--nq 16 --b 16,20,24,28,32 --nk 4096,8192,32768,131072), (--nq 8 --b 20,24,28 --nk 8192,32768) and, in a second process, (--nq 16 --b 20,24,28 --nk 4096,8192,32768,131072)",
  'paged (run 2)': "python3 scripts/paged_bench.py --kernels 72,75 --nq 1 --d 128 --ragged --b 1,8 --nk 32768,131072 --pages 64,256 --in-order --rounds 3 (75: the probe)",
 },
 'series': {
  'run 2, trial: one-split grids past the SMs': series('/tmp/r49/j/q128.json', probes),
  'run 3, 16 query rows, first process': series('/tmp/r50/j/q16a.json'),
  'run 3, 16 query rows, second process': series('/tmp/r50/j/q16b.json'),
  'run 3, 8 query rows': series('/tmp/r50/j/q8.json'),
 },
 'paged one row (run 2)': [[r['arm'].replace(' 75', ' probe 75'), r['B'], r['Nk'], round(r['ms'] * 1000, 2), round(r['gbps'], 1)] for r in paged],
}
json.dump(doc, open('docs/results/h200_decode_73.json', 'w'), separators=(',', ':'))
print('ok', {k: {i: len(v) for i, v in s.items()} for k, s in doc['series'].items()}, len(doc['paged one row (run 2)']))
