# Probes (never rungs) of rung 72 at d = 96: 73 the maps' L2 promotion 64 bytes at d = 96 (128
# elsewhere); 74 d = 96 keeps rung 71's cp.async copies (TMA only where d % 64 == 0).
import os, re, shutil
R = '/work/main'
SRC = f'{R}/kernels/72_decode_rows_tma'
for num, slug in [(73, 'trial_d96_l2_64'), (74, 'trial_d96_cp_async')]:
    dst = f'{R}/build-carry/tried/{num}_{slug}'
    shutil.rmtree(dst, ignore_errors=True); os.makedirs(dst)
    for n in ('splits.h', 'row_copy.h', 'decode_rows_tma.cu'):
        s = open(f'{SRC}/{n}').read()
        subs = [('k72_decode_rows_tma', f'k{num}_{slug}'),
                ('kernels/72_decode_rows_tma/', f'kernels/{num}_{slug}/'),
                ('kernel_72()', f'kernel_{num}()'), ('k.number = 72;', f'k.number = {num};'),
                ('k.slug = "decode_rows_tma";', f'k.slug = "{slug}";')]
        if num == 73:
            subs += [('constexpr int kL2Promotion = 128;',
                      'template <int kD>\nconstexpr int l2_promotion() { return kD == 96 ? 64 : 128; }'),
                     ('kSwizzle, kL2Promotion)', 'kSwizzle, l2_promotion<kHeadDim>())')]
        else:
            subs += [('const bool tma = kWgmma && tile_in_page;',
                      'const bool tma = kWgmma && kHeadDim % 64 == 0 && tile_in_page;'),
                     ('if constexpr (kSwizzle != 0) {', 'if constexpr (kSwizzle != 0 && kHeadDim % 64 == 0) {')]
        for a, b in subs:
            assert a in s or n != 'decode_rows_tma.cu' or a.startswith(('k72', 'kernels/')), (num, a)
            s = s.replace(a, b)
        s = re.sub(r'k\.title = "[^"]*";', f'k.title = "decode (probe): {slug}";', s)
        open(f'{dst}/{n if n != "decode_rows_tma.cu" else slug + ".cu"}', 'w').write(s)
    print(dst)
