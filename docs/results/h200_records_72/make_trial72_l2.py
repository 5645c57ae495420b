# Probes (never rungs): rung 72 with the tensor maps' L2 promotion at 128 bytes (73) and none (74).
import os, re, shutil
R = '/work/main'
SRC = f'{R}/kernels/72_decode_rows_tma'
for num, slug, bytes_ in [(73, 'trial_l2_128', 128), (74, 'trial_l2_none', 0)]:
    dst = f'{R}/build-carry/tried/{num}_{slug}'
    shutil.rmtree(dst, ignore_errors=True); os.makedirs(dst)
    for n in ('splits.h', 'row_copy.h', 'decode_rows_tma.cu'):
        s = open(f'{SRC}/{n}').read()
        for a, b in [('k72_decode_rows_tma', f'k{num}_{slug}'),
                     ('kernels/72_decode_rows_tma/', f'kernels/{num}_{slug}/'),
                     ('kernel_72()', f'kernel_{num}()'), ('k.number = 72;', f'k.number = {num};'),
                     ('k.slug = "decode_rows_tma";', f'k.slug = "{slug}";'),
                     ('constexpr int kL2Promotion = 256;', f'constexpr int kL2Promotion = {bytes_};')]:
            s = s.replace(a, b)
        s = re.sub(r'k\.title = "[^"]*";', f'k.title = "decode (probe): TMA, L2 promotion {bytes_}";', s)
        open(f'{dst}/{n if n != "decode_rows_tma.cu" else slug + ".cu"}', 'w').write(s)
    print(dst)
