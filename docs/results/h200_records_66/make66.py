import json, glob
def load(paths, rename=None):
    out = {}
    for p in sorted(paths):
        for r in json.load(open(p))['rows']:
            impl = (rename or {}).get(r['impl'], r['impl'])
            out.setdefault(impl, []).append([r['d'], f"{r['H']}/{r['H_kv']}", r['B'], r['Nq'], r['Nk'], round(r['ms'] * 1000, 2)])
    for v in out.values(): v.sort()
    return out
def no_ceiling(x):
    x.pop('hbm_read_ceiling', None); return x
series = {
  'final': load(glob.glob('/tmp/r6/j/*.json')),
  'every lone block': no_ceiling(load(glob.glob('/tmp/r4/j/*.json'), {'66_decode_one_limit': 'trial_256k'})),
  'lone 512 KiB': no_ceiling(load(glob.glob('/tmp/r2/*.json'), {'66_decode_lone_half': 'trial_512k'})),
  'after: d96 trial': no_ceiling(load(glob.glob('/tmp/r7/*.json'), {'67_decode_big_d96': 'trial_d96_big'})),
  'lone 256 KiB': no_ceiling(load(glob.glob('/tmp/r3/*.json'), {'66_decode_lone_half': 'trial_512k', '67_decode_lone_short': 'trial_256k'})),
}
doc = {
 'gpu': 'NVIDIA H200', 'driver': '580.159.04', 'torch': '2.11.0+cu130', 'nvcc': '13.0', 'date': '2026-11-28',
 'note': ("Rung 66 against rung 65, fp16, one query row or 16 (causal), one process a command, CUDA graphs, the L2 "
          "flushed before every run, 3 balanced rounds, each figure the median of its rounds. Rows: series, then impl, "
          "then one row a call: d, H_q/H_kv, B, Nq, Nk, us (GB/s = 2 B H_kv Nk d 2 bytes over us). sdpa_flash / "
          "sdpa_cudnn: SDPA with that backend forced, enable_gqa=True; hbm_read_ceiling (series final): a kernel "
          "reading the same bytes. Series final: rung 66 as committed. The trials are rung 65 with its lone limit changed, built as a "
          "rung of their own beside it: trial_512k and trial_256k hold every lone block (half = 1, no split) to 512 "
          "or 256 KiB instead of 1 MiB, grids past half the SMs included; series 'every lone block' is trial_256k "
          "as a first rung 66 over the calls it moved and 'sweep' rows at B = 8, d = 128. Series 'after: d96 trial': "
          "trial_d96_big, rung 66 with a d = 96 block whose rows fit one warp counting its tile as a big one "
          "(a ring of 3 stages, one slot an SM in the waves' count and the price, the launch alone for long "
          "chunks), not kept."),
 'commands': {
   'final': 'python3 scripts/decode_bench.py --graphs --kernels 65,66 --rounds 3 --repeats 20 with --d 64 --heads 32/8 --b 5,8,9 --nk 2048,4096 --nq 1; --d 64 --heads 32/32 --b 2 --nk 2048,4096 --nq 1,16; --d 96 --heads 32/8 --b 5,8,12,16 --nk 1024,2048 --nq 1; --d 96 --heads 32/32 --b 2,4 --nk 1024,2048 --nq 1,16; --d 128 --heads 32/8 --b 5,8,9 --nk 1024,2048 --nq 1; --d 128 --heads 32/32 --b 2 --nk 1024,2048 --nq 1,16; --d 192 --heads 32/8 --b 5,8,12 --nk 768,1024 --nq 1; --d 192 --heads 32/32 --b 2,3 --nk 768,1024 --nq 1,16',
   'every lone block': 'as final with --kernels 65,<trial_256k>, and --b 5,8,12,16,24 at d = 96 GQA, --b 2,4,6 at d = 96 MHA; and --d 128 --heads 32/8,32/32 --b 8 --nk 1024,4096 --nq 1,16',
   'lone 512 KiB': '--kernels 65,<trial_512k>: --d 64 --heads 32/8 --b 5,6,7,8,10,12 --nk 3072,4096 --nq 1; --d 128 --heads 32/8 --b 5,6,7,8 --nk 1536,2048 --nq 1; --d 128 --heads 32/32 --b 2 --nk 1536,2048 --nq 1,16',
   'after: d96 trial': '--kernels 66,<trial_d96_big> --d 96: --heads 32/8 --b 1,8 --nk 1024,8192,32768,131072 --nq 1; --heads 32/32 --b 1 --nk 8192,32768,131072 --nq 1,16; --heads 32/8 --b 8 --nk 32768 --nq 16',
   'lone 256 KiB': '--kernels 65,<trial_512k>,<trial_256k>: --d 128 --heads 32/8 --b 5,6,7,8 --nk 768,1024 --nq 1; --d 128 --heads 32/32 --b 2 --nk 768,1024 --nq 1,16; --d 64 --heads 32/8 --b 5,8 --nk 1536,2048 --nq 1; --d 96 --heads 32/8 --b 5,6,7,8 --nk 1024,1536,2048 --nq 1',
 },
 'columns': ['d', 'H', 'B', 'Nq', 'Nk', 'us'],
 'series': series,
}
s = json.dumps(doc, separators=(', ', ': '))
open('/work/main/docs/results/h200_decode_66.json', 'w').write(s + '\n')
print(len(s), {k: {i: len(v) for i, v in x.items()} for k, x in series.items()})
