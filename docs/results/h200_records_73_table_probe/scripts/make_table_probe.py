# docs/results/h200_decode_73_table_probe.json from runs 10 and 11 (r57.sh), read from the records.
import json, os
R = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')
def rows(run, i):
    out = []
    for r in json.load(open(os.path.join(R, run, 'j', f'paged{i}.json')))['rows']:
        arm = r['arm'].replace(' 74', ' probe')
        out.append([arm, r['B'], r['Nk'], round(r['ms'] * 1000, 2), round(r['gbps'], 1)])
    return out
doc = {
 'gpu': 'NVIDIA H200', 'driver': '580.159.04', 'torch': '2.11.0+cu130', 'nvcc': '13.0', 'date': '2026-11-29', 'flush': 'reads',
 'note': ("The paged one-row cell (GQA 32/8, one query row, d = 128, B = 8, Nk = 32768, each sequence's length uniform "
          "in [Nk / 4, Nk], CUDA graphs, 5 balanced rounds of 20 calls) with rung 73 beside a probe built from it on the "
          "device (never a rung): its copies of a tile that lies in one page take the page as b x (capacity / page size) + "
          "index, the page a pool in order holds there, instead of loading it from the block table (right only for pools "
          "in order: its shuffled arms are wrong, and the script said so). Run 10: the division inside the tile's copy; "
          "run 11: worked out once a block. Two processes a run, one machine a run. Rows [arm, B, Nk, us, GB/s of the "
          "keys each sequence holds]."),
 'commands': {'runs 10 and 11': "python3 scripts/paged_bench.py --kernels 73,<probe> --nq 1 --d 128 --ragged --b 8 --nk 32768 --pages 64,256 --in-order --rounds 5"},
 'series': {'run 10, first process': rows('run10', 1), 'run 10, second process': rows('run10', 2),
            'run 11, first process': rows('run11', 1), 'run 11, second process': rows('run11', 2)},
}
json.dump(doc, open(os.path.join(R, '..', 'h200_decode_73_table_probe.json'), 'w'), separators=(',', ':'))
print('ok')
