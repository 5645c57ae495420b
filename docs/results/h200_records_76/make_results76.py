import json
def paged(path):
    d=json.load(open(path))
    return [[r['arm'], r['B'], r['Nk'], r['d'], round(r['ms']*1000,2), round(r['gbps'],1)] for r in d['rows']], d
def plain(path):
    d=json.load(open(path)); out={}
    for r in d['rows']:
        out.setdefault(r['impl'],[]).append([f"{r['H']}/{r['H_kv']}", r['d'], r['B'], r['Nq'], r['Nk'], round(r['ms']*1000,2)])
    return out
S={}
S['run 1, first trial, one process (not kept)'],meta=paged('/tmp/r76a/j/pagedA.json')
S['run 2, pieces across sequences, first process']=paged('/tmp/r76b/j/pagedA.json')[0]
S['run 2, second process']=paged('/tmp/r76b/j/pagedB.json')[0]
S['run 2, every sequence at the capacity']=paged('/tmp/r76b/j/fullC.json')[0]
S['run 2, 16 query rows at B = 20 and 24']=paged('/tmp/r76b/j/rowsD.json')[0]
S['run 2, without lengths (decode_bench)']=plain('/tmp/r76b/j/plain.json')
S['run 3, first process']=paged('/tmp/r76c/j/pagedA.json')[0]
S['run 3, second process']=paged('/tmp/r76c/j/pagedB.json')[0]
S['run 3, every sequence at the capacity']=paged('/tmp/r76c/j/fullC.json')[0]
S['run 4, 8192 and 131072 keys']=paged('/tmp/r76d/j/longE.json')[0]
S['run 4, d = 192']=paged('/tmp/r76d/j/d192F.json')[0]
S['run 4, 16 query rows at B = 4 and 8']=paged('/tmp/r76d/j/rowsG.json')[0]
out={'gpu':'NVIDIA H200','driver':'580.159.04','torch':meta['torch'],'nvcc':'13.0','date':'2026-11-29','flush':'reads',
 'note':("Rung 76 (a ragged batch's key tiles dealt evenly to the split blocks) beside rung 75. Paged rows "
  "[arm, B, Nk, d, us, GB/s]: GQA 32/8, one query row unless the series says 16, each sequence's length uniform in "
  "[Nk / 4, Nk] (paged_bench.py --ragged, seed 11; the lengths are drawn cell after cell, so a cell's lengths depend on the "
  "--b and --nk lists of its command) but the series 'every sequence at the capacity', each arm the median of 5 balanced "
  "rounds, CUDA graphs, the L2 flushed by reads; an arm's trailing number is its rung. Run 1: a first trial, not kept (each "
  "sequence dealt its own share of a KV head's S x B blocks, no block across sequences, a runtime flag): one process. "
  "Run 2: the blocks' tiles across sequences (the kept kernel; the rule then dealt every call of B >= 2 with lengths that "
  "merged in the combine kernel or in a cluster of 1 MiB chunks): two processes (the kernels in both orders), every sequence at "
  "the capacity, 16 query rows at B = 20 and 24, and decode_bench without lengths (rows [H_q/H_kv, d, B, Nq, Nk, us], "
  "3 rounds). Run 3: the rule at B >= 4 and one wave: two processes at B = 2, 3, 4, 6, 8. Run 4: one process, 8192 and "
  "131072 keys (pages of 64 and 256), d = 192, 16 query rows at B = 4 and 8. The kept rule (splits of 4 MiB or more) deals, "
  "of these cells, B = 4 and 8 at 32768 and 131072 keys, d = 192, every sequence at the capacity and 16 rows at B = 8; the "
  "dealt kernel's code is the same in runs 2-4 (run 3 also chose the combine's batch of loads by the split count)."),
 'commands':{
  'run 1':'paged_bench.py --kernels 75,76 --nq 1 --d 128 --ragged --pages 64 --b 1,2,4,8 --nk 32768 --rounds 5',
  'run 2':'paged_bench.py --kernels 75,76 (then 76,75) --nq 1 --d 128 --ragged --pages 64 --b 1,2,4,8 --nk 32768 --rounds 5; --pages 64 --b 4,8 (no --ragged); --nq 16 --ragged --b 20,24; decode_bench.py --graphs --rounds 3 --repeats 20 --kernels 75,76 --heads 32/8 --nq 1,16 --b 1,8 --nk 8192,32768',
  'run 3':'paged_bench.py --kernels 75,76 (then 76,75) --nq 1 --d 128 --ragged --pages 64 --b 2,3,4,6,8 --nk 32768 --rounds 5; --pages 64 --b 4,8 (no --ragged)',
  'run 4':'paged_bench.py --kernels 75,76 --ragged --rounds 5: --nq 1 --d 128 --pages 64,256 --b 4,8 --nk 8192,131072; --d 192 --pages 64 --b 4,8 --nk 32768; --nq 16 --d 128 --pages 64 --b 4,8 --nk 32768'},
 'series':S,
 'tests':{
  'run 3':"DecodeRules.Rung76DealsARaggedBatchEvenly, PagedSame.Rung76DealsRaggedBatchesRightAndLeavesTheRestAsRung75 (15 calls), PagedLong, test_kvcache_gpu (17, best on 76); compute-sanitizer memcheck 0 errors and racecheck 0 hazards on sanitize_cache.py --kernel 76 --d 128,96 --pages 0,64 --heads 32/8,8/8 --capacity 65536 (32 calls, 0 wrong)",
  'run 4':"ctest -R 'Cache/Paged|Grid/Decode|PagedLong': 25 of 25 passed",
  'run 5':"the kept rule: DecodeRules.Rung76DealsARaggedBatchEvenly and PagedSame.Rung76DealsRaggedBatchesRightAndLeavesTheRestAsRung75 passed"}}
json.dump(out,open('/work/main/docs/results/h200_decode_76.json','w'),separators=(',',':'))
print('ok')
