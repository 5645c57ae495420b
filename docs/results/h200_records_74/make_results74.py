# Writes docs/results/h200_decode_74.json from the runs' JSON (run1.tar.gz: r66's j/, brief.txt;
# run2.tar.gz: r67's j/), unpacked under /tmp/r66 and /tmp/r67, and run 1's brief.txt.
import json, re
def paged(path, rename=None):
    out = []
    for r in json.load(open(path))['rows']:
        arm = rename(r['arm']) if rename else r['arm']
        out.append([arm, r['B'], r['Nk'], round(r['ms'] * 1000, 2), round(r['gbps'], 1)])
    return out
def dec(path):
    out = {}
    for r in json.load(open(path))['rows']:
        if r.get('ms') is None: continue
        out.setdefault(r['impl'], []).append([f"{r['H']}/{r['H_kv']}", r['d'], r['B'], r['Nq'], r['Nk'], round(r['ms'] * 1000, 2)])
    return out
def ncu(path):
    res = {}; cur = None
    for l in open(path):
        m = re.match(r'== (\S+) (\d+) rc', l)
        if m:
            cur = f"{m.group(1)} {'rung 73' if m.group(2) == '73' else 'trial ' + m.group(2)}"; res[cur] = {}; continue
        m = re.match(r'\s+(\S+)\s+\S+(?:/\S+)?\s+([\d,.]+)$', l.rstrip()) or re.match(r'\s+(\S+)\s+([\d,.]+)$', l.rstrip())
        if cur and m: res[cur][m.group(1)] = float(m.group(2).replace(',', ''))
    return res
trial = lambda a: re.sub(r' (7[45])$', r' trial \1', a)
# (the note and commands as in the committed file)
series = {
  'run 1, B = 8, first process': paged('/tmp/r66/j/b8a.json', trial),
  'run 1, B = 8, second process': paged('/tmp/r66/j/b8b.json', trial),
  'run 1, B = 8, 8192 and 131072 keys': paged('/tmp/r66/j/b8c.json', trial),
  'run 1, B = 2 and 4': paged('/tmp/r66/j/b24.json', trial),
  'run 2, B = 8, first process': paged('/tmp/r67/j/b8a.json'),
  'run 2, B = 8, second process': paged('/tmp/r67/j/b8b.json'),
  'run 2, decode': dec('/tmp/r67/j/dec.json')}
d = json.load(open('docs/results/h200_decode_74.json'))
assert d['series'] == json.loads(json.dumps(series)) and d['ncu (run 1)'] == ncu('/tmp/r66/brief.txt')
print('h200_decode_74.json matches the runs')
