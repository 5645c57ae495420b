# docs/results/h200_decode_73_overlap.json from runs 7 and 8 (r54.sh, r55.sh), read from the records.
import json, os
R = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')
def series(path, d, rename):
    out = {}
    for r in json.load(open(os.path.join(R, path)))['rows']:
        impl = rename.get(r['impl'], r['impl'])
        out.setdefault(impl, []).append([f"{r['H']}/{r['H_kv']}", d, r['B'], r['Nq'], r['Nk'], round(r['ms'] * 1000, 2)])
    return out
first = {'74_decode_rows_overlap': 'trial, first form (every wgmma instance)'}
last = {'74_decode_rows_overlap': 'trial, last form (d = 64 and 96)'}
doc = {
 'gpu': 'NVIDIA H200', 'driver': '580.159.04', 'torch': '2.11.0+cu130', 'nvcc': '13.0', 'date': '2026-11-29', 'flush': 'reads',
 'note': ("A trial after rung 73, never a rung: rung 21's overlap (the softmax of S_j while the tensor cores run "
          "P_{j-1} V_{j-1}, V copied a tile after K on barriers of its own) in rung 73's blocks of more than 16 rows, "
          "built beside rung 73 as a folder numbered 74. Run 7: its first form (every wgmma instance); run 8: its last "
          "(d = 64 and 96 only, whose ring has four stages; the other instances rung 73's SASS). fp16, GQA 32/8 (and MHA "
          "32/32 for one query row), CUDA graphs, balanced rounds (3 of 20 calls), each figure the median of its rounds' "
          "medians; SDPA flash and cuDNN (enable_gqa=True) and the read ceiling (hbm_read_ceiling) in the same process. "
          "Rows [H_q/H_kv, d, B, Nq, Nk, us] under each impl; Nq > 1 causal (bottom-right). Two machines. Nsight Compute "
          "(run 8, one call each, own clocks, d = 96, B = 8, 32768 keys, 16 query rows): 'ncu' below."),
 'commands': {
  'run 7': "python3 scripts/decode_bench.py --graphs --kernels 73,74 --rounds 3 --repeats 20 with (--d 128 --heads 32/8 --nq 16 --b 1,8,20,24,32 --nk 8192,32768), (--d 192 --nq 16 --b 1,8 --nk 32768), (--d 96 --nq 16 --b 8 --nk 32768), (--d 128 --heads 32/8,32/32 --nq 1 --b 8 --nk 32768)",
  'run 8': "the same with (--d 96 --nq 16 --b 1,8,20,32 --nk 4096,8192,32768,131072), (--d 64, the same), then (--d 96 --nq 8,16 --b 1,8,20,32 --nk 8192,32768)",
  'ncu (run 8)': "ncu --profile-from-start off --clock-control none -k regex:'decode_kernel|combine_kernel' --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__average_warps_issue_stalled_{barrier,long_scoreboard,gmma}_per_issue_active.ratio python3 ncu_b.py 16 <rung> 96 8 32768",
 },
 'series': {
  'run 7, d = 128, 16 query rows': series('run7/j/q16.json', 128, first),
  'run 7, d = 192, 16 query rows': series('run7/j/d192.json', 192, first),
  'run 7, d = 96, 16 query rows': series('run7/j/d96.json', 96, first),
  'run 7, d = 128, one query row': series('run7/j/nq1.json', 128, first),
  'run 8, d = 96, 16 query rows': series('run8/j/d96a.json', 96, last),
  'run 8, d = 64, 16 query rows': series('run8/j/d64a.json', 64, last),
  'run 8, d = 96, 8 and 16 query rows (again)': series('run8/j/d96b.json', 96, last),
 },
 'ncu': {'columns': ['impl', 'kernel', 'us', 'DRAM MB read', 'DRAM % of peak', 'issue active %', 'stall barrier', 'stall long scoreboard', 'stall gmma'],
         'rows': [['73_decode_rows_unsplit', 'decode_kernel', 224.70, 926.47, 86.07, 24.10, 1.32, 2.55, 1.18],
                  ['73_decode_rows_unsplit', 'combine_kernel', 8.45, 6.38, 15.71, 42.91, 0, 2.32, 0],
                  ['trial, last form', 'decode_kernel', 224.74, 929.69, 86.36, 25.48, 0.60, 1.84, 1.35],
                  ['trial, last form', 'combine_kernel', 8.67, 6.38, 15.34, 46.08, 0, 2.29, 0]]},
}
json.dump(doc, open(os.path.join(R, '..', 'h200_decode_73_overlap.json'), 'w'), separators=(',', ':'))
print('ok', {k: {i: len(v) for i, v in s.items()} for k, s in doc['series'].items()})
