# Writes docs/results/h200_decode_sweep_74.json and h200_decode_75.json from the runs' JSON
# (run1.tar.gz: r70.sh; run2.tar.gz: r71.sh; run3.tar.gz: r72.sh; run4.tar.gz: r73.sh), each
# unpacked under R/dN (python3 make_results75.py R).
import json, os, sys
R = sys.argv[1]
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')
META = {'gpu': 'NVIDIA H200', 'driver': '580.159.04', 'torch': '2.11.0+cu130', 'nvcc': '13.0',
        'date': '2026-11-29'}
def paged(path):
    return [[r['arm'], r['B'], r['Nk'], r['d'], round(r['ms'] * 1000, 2), round(r['gbps'], 1)]
            for r in json.load(open(path))['rows']]
def dec(path):
    out = {}
    for r in json.load(open(path))['rows']:
        if r.get('ms') is None: continue
        out.setdefault(r['impl'], []).append([f"{r['H']}/{r['H_kv']}", r['d'], r['B'], r['Nq'], r['Nk'],
                                              round(r['ms'] * 1000, 2)])
    return out
series = {}
for part in ('gqa', 'mha'):
    for r in json.load(open(f'{R}/d1/j/{part}.json'))['rows']:
        series.setdefault(r['impl'], []).append([f"{r['H']}/{r['H_kv']}", r['B'], r['Nq'], r['Nk'],
                                                 round(r['ms'] * 1000, 2)])
sweep = dict(META, note=(
    "The decode sweep with the best rung of compute capability 9.0, rung 74 (a build of rungs 73 "
    "and 74: 'best' takes 74 for every call), against SDPA flash and cuDNN (enable_gqa=True), fp16, "
    "d = 128, CUDA graphs, balanced rounds (3 of 20 calls), each figure the median of its rounds' "
    "medians, the L2 flushed by reads. Rows [H_q/H_kv, B, Nq, Nk, us] under each impl; "
    "hbm_read_ceiling: torch's sum over the same K and V, the read ceiling of the run. Nq = 16 rows "
    "causal (bottom-right). MHA at B = 64 with 131072 keys (128 GiB) is not run. One machine, two "
    "processes (GQA, then MHA)."),
    commands={'d = 128, reads': "python3 scripts/decode_bench.py --graphs --kernels best --rounds 3 "
              "--repeats 20 --heads 32/8 (then --heads 32/32): the default sweep, B 1, 8, 64; Nk "
              "1024-131072; Nq 1 and 16"},
    series={'d = 128, reads': series})
json.dump(sweep, open(os.path.join(OUT, 'h200_decode_sweep_74.json'), 'w'), separators=(',', ':'))
doc = dict(META, flush='reads', note=(
    "Rung 75 (the block table in shared memory for the launches of one-row blocks that run one "
    "block an SM) and the cells that led to it. Paged rows [arm, B, Nk, d, us, GB/s]: GQA 32/8, one "
    "query row, each sequence's length uniform in [Nk / 4, Nk] (but series 'run 2, full lengths'), "
    "each arm the median of 5 balanced rounds, CUDA graphs, the L2 flushed by reads; an arm's "
    "trailing number is its rung. Run 1: rungs 73 and 74 at B = 1, 2 and 4 with 32768 keys, two "
    "processes (the same device run as the sweep with rung 74). Run 2: rung 74 at B = 4 and 8 with "
    "pages in order, shuffled within 2 MiB and 2 MiB spans shuffled (two processes), and rungs 73 "
    "and 74 with every sequence at the capacity. Run 3: rung 75 beside rung 74 (a build of the two): "
    "two processes at B = 1, 2, 4 and 8, one at 8192 and 131072 keys and one at d = 192; then "
    "decode_bench on the contiguous calls of the changed launches (rows [H_q/H_kv, d, B, Nq, Nk, us], "
    "3 rounds). Run 4: those decode_bench calls again, rung 75 first, 5 rounds."),
    commands={
        'run 1': "python3 scripts/paged_bench.py --kernels 73,74 --nq 1 --d 128 --ragged --pages 64,256 "
                 "--rounds 5 --b 1,2,4 --nk 32768 (twice)",
        'run 2': "paged_bench.py --kernels 74 --nq 1 --d 128 --pages 64 --rounds 5 --b 4,8 --nk 32768 "
                 "--ragged --in-order --spans (twice); --kernels 73,74 --b 4,8 --nk 32768 --in-order",
        'run 3': "paged_bench.py --nq 1 --ragged --pages 64,256 --rounds 5 --kernels 74,75 --d 128 --b "
                 "1,2,4,8 --nk 32768 --in-order (then --kernels 75,74); --kernels 74,75 --b 1,4 --nk "
                 "8192,131072; --d 192 --b 1,4 --nk 32768. decode_bench.py --graphs --rounds 3 --repeats "
                 "20 --kernels 74,75 --heads 32/8 --nq 1 --b 1,4 --nk 8192,32768,131072; --d 192 --b 1,16 "
                 "--nk 4096,32768",
        'run 4': "decode_bench.py --graphs --rounds 5 --repeats 20 --kernels 75,74 (the calls of run 3)"},
    series={
        'run 1, first process': paged(f'{R}/d1/j/paged1.json'),
        'run 1, second process': paged(f'{R}/d1/j/paged2.json'),
        'run 2, spans, first process': paged(f'{R}/d2/j/spans1.json'),
        'run 2, spans, second process': paged(f'{R}/d2/j/spans2.json'),
        'run 2, full lengths': paged(f'{R}/d2/j/full.json'),
        'run 3, first process (74, 75)': paged(f'{R}/d3/j/pagedA.json'),
        'run 3, second process (75, 74)': paged(f'{R}/d3/j/pagedB.json'),
        'run 3, 8192 and 131072 keys': paged(f'{R}/d3/j/pagedC.json'),
        'run 3, d = 192': paged(f'{R}/d3/j/pagedD.json'),
        'run 3, contiguous, d = 128': dec(f'{R}/d3/j/contig.json'),
        'run 3, contiguous, d = 192': dec(f'{R}/d3/j/contig192.json'),
        'run 4, contiguous, d = 128': dec(f'{R}/d4/j/contig.json'),
        'run 4, contiguous, d = 192': dec(f'{R}/d4/j/contig192.json')})
json.dump(doc, open(os.path.join(OUT, 'h200_decode_75.json'), 'w'), separators=(',', ':'))
print('wrote h200_decode_sweep_74.json and h200_decode_75.json')
