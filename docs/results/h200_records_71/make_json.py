# Writes docs/results/h200_decode_71.json from run1/j, run2/j and run3/j (this folder).
import glob, json, os
H = os.path.dirname(os.path.abspath(__file__))
def series(files):
    out = {}
    for f in files:
        for r in json.load(open(f))['rows']:
            if r.get('ms'):
                out.setdefault(r['impl'], []).append([f"{r['H']}/{r['H_kv']}", r['d'], r['B'], r['Nq'],
                                                      r['Nk'], round(r['ms'] * 1000, 2)])
    return out
j = lambda run: sorted(f for f in glob.glob(f'{H}/{run}/j/*.json') if 'paged' not in f)
paged = [[r['arm'], d, r['B'], r['Nk'], round(r['ms'] * 1000, 2), round(r['gbps'], 1)]
         for d in (192, 96) for r in json.load(open(f'{H}/run3/j/paged{d}.json'))['rows']]
out = json.load(open(f'{H}/../h200_decode_71.json'))  # its header fields (note, commands)
out['series'] = {'survey (rungs 69, 70)': series(j('run1')), 'run 2, first process': series(j('run2')),
                 'run 3, second process': series(j('run3'))}
out['paged (run 3)'] = paged
open(f'{H}/../h200_decode_71.json', 'w').write(json.dumps(out, separators=(',', ':')) + '\n')
