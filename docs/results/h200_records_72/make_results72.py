# docs/results/h200_decode_72.json from the four device runs of rung 72 (decode_bench / paged_bench JSON).
import json, glob, os
B = '/tmp/rec72'
def series(run, names):
    out = {}
    for n in names:
        p = f'{B}/{run}/{n}.json'
        if not os.path.exists(p): continue
        for r in json.load(open(p))['rows']:
            out.setdefault(r['impl'], []).append([f"{r['H']}/{r['H_kv']}", r['d'], r['B'], r['Nq'], r['Nk'], round(r['ms'] * 1000, 2)])
    return out
doc = {
 'gpu': 'NVIDIA H200', 'driver': '580.159.04', 'torch': '2.11.0+cu130', 'nvcc': '13.0', 'date': '2026-11-29', 'flush': 'reads',
 'note': ("Rung 72 against rung 71 (built together), GQA 32/8 with 16 query rows (causal, bottom-right), fp16, CUDA graphs, "
          "balanced rounds (3 of 20 calls), each figure the median of its rounds' medians; SDPA flash and cuDNN (enable_gqa=True) "
          "and the read ceiling (hbm_read_ceiling: torch's sum over the same K and V) in the same process. Rows [H_q/H_kv, d, B, Nq, Nk, us] "
          "under each impl. Run 1: rung 72's first build, its tensor maps with the L2 promotion of 256 bytes. Run 2: 256 bytes (72) "
          "against two probes built from it, 128 bytes (73_trial_l2_128) and none (74_trial_l2_none). Run 3: rung 72 as kept (128 bytes) "
          "but for the block barrier after its mbarriers' set-up; run 4: as kept, d = 192 and 96 again. Four machines. "
          "Paged (run 3): each sequence's length uniform in [Nk / 4, Nk], shuffled pages, rows [arm, d, B, Nk, us, GB/s]."),
 'commands': {
  'decode': "python3 scripts/decode_bench.py --graphs --kernels 71,72 --heads 32/8 --nq 16 --rounds 3 --repeats 20 with (--d 64, 96, 128, 192 --b 1,8,32 --nk 8192,32768) (runs 1 and 3; run 4 d = 192 and 96 alone) and (--d 192 --b 1 --nk 131072) (run 3)",
  'probes': "python3 scripts/decode_bench.py --graphs --kernels 71,72,73,74 --heads 32/8 --nq 16 --rounds 3 --repeats 20 with (--d 128 and 96 --b 8,32 --nk 32768), (--d 64 --b 8 --nk 32768), (--d 192 --b 1,8 --nk 32768) (run 2)",
  'paged': "python3 scripts/paged_bench.py --kernels 71,72 --nq 16 --d 192 --ragged --b 8 --nk 32768 --pages 64,256 --rounds 3 (run 3)",
 },
 'series': {
  'run 1, L2 promotion 256 B': series('run1', ['q64', 'q96', 'q128', 'q192']),
  'run 2, the L2 promotion probes': series('run2', ['p64', 'p96', 'p128', 'p192']),
  'run 3, as kept but the set-up barrier': series('run3', ['q64', 'q96', 'q128', 'q192', 'q192l']),
  'run 4, as kept': series('run4', ['q96', 'q192']),
 },
 'paged (run 3)': [[r['arm'], r['d'], r['B'], r['Nk'], round(r['ms'] * 1000, 2), round(r['gbps'], 1)]
                   for r in json.load(open(f'{B}/run3/paged192.json'))['rows']],
}
json.dump(doc, open('docs/results/h200_decode_72.json', 'w'), separators=(',', ':'))
print('ok', {k: {i: len(v) for i, v in s.items()} for k, s in doc['series'].items()})
