# Writes docs/results/h200_decode_sweep_75.json from run 6's JSON (run6.tar.gz: r74.sh's j/),
# unpacked under R (python3 make_sweep75.py R).
import json, os, sys
R = sys.argv[1]
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')
series = {}
for part in ('gqa', 'mha'):
    for r in json.load(open(os.path.join(R, 'j', part + '.json')))['rows']:
        series.setdefault(r['impl'], []).append([f"{r['H']}/{r['H_kv']}", r['B'], r['Nq'], r['Nk'],
                                                 round(r['ms'] * 1000, 2)])
doc = {
 'gpu': 'NVIDIA H200', 'driver': '580.159.04', 'torch': '2.11.0+cu130', 'nvcc': '13.0', 'date': '2026-11-29',
 'note': ("The decode sweep with the best rung of compute capability 9.0, rung 75 (built alone: 'best' takes it for "
          "every call), against SDPA flash and cuDNN (enable_gqa=True), fp16, d = 128, CUDA graphs, balanced rounds (3 of "
          "20 calls), each figure the median of its rounds' medians, the L2 flushed by reads. Rows [H_q/H_kv, B, Nq, Nk, us] "
          "under each impl; hbm_read_ceiling: torch's sum over the same K and V, the read ceiling of the run. Nq = 16 rows "
          "causal (bottom-right). MHA at B = 64 with 131072 keys (128 GiB) is not run. One machine, two processes (GQA, "
          "then MHA)."),
 'commands': {'d = 128, reads': "python3 scripts/decode_bench.py --graphs --kernels best --rounds 3 --repeats 20 --heads 32/8 (then --heads 32/32): the default sweep, B 1, 8, 64; Nk 1024-131072; Nq 1 and 16"},
 'series': {'d = 128, reads': series},
}
json.dump(doc, open(os.path.join(OUT, 'h200_decode_sweep_75.json'), 'w'), separators=(',', ':'))
print('ok', {k: len(v) for k, v in series.items()})
