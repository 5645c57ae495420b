# Probe (never a rung): rung 70 with wgmma at d = 128 only (d = 64 back on mma.sync), in case
# d = 64's wgmma path stays wrong.
import os, re, shutil
R = '/work/main'
SRC = f'{R}/kernels/70_decode_rows_wgmma'
num, slug = 71, 'trial_wgmma128'
dst = f'{R}/build-carry/tried/{num}_{slug}'
shutil.rmtree(dst, ignore_errors=True); os.makedirs(dst)
for n, out in (('splits.h', 'splits.h'), ('row_copy.h', 'row_copy.h'), ('decode_rows_wgmma.cu', f'{slug}.cu')):
    s = open(f'{SRC}/{n}').read()
    for a, b in [('k70_decode_rows_wgmma', f'k{num}_{slug}'),
                 ('kernels/70_decode_rows_wgmma/', f'kernels/{num}_{slug}/'),
                 ('kernel_70()', f'kernel_{num}()'), ('k.number = 70;', f'k.number = {num};'),
                 ('k.slug = "decode_rows_wgmma";', f'k.slug = "{slug}";')]:
        s = s.replace(a, b)
    if n.endswith('.cu'):
        a = 'return !kKeyWarps && (kHeadDim == 64 || kHeadDim == 128);'
        assert s.count(a) == 1
        s = s.replace(a, 'return !kKeyWarps && kHeadDim == 128;')
    open(f'{dst}/{out}', 'w').write(s)
print('made', dst)
