# Probes (never rungs) on rung 72: 73 a one-split grid of many-row blocks past the SMs keeps one
# split at two an SM (not rung 68's splits alone); 74 it takes two splits at two an SM (page 69's
# exercise); 75 the key-warp blocks hold the block table 32 entries a warp, a shuffle a tile.
import os, re, shutil
R = '/work/main'
SRC = f'{R}/kernels/72_decode_rows_tma'
TWO = '  return s >= 2 && chunk >= kTwoChunkBytes ? s : 0;\n}'
CUR = '''  int cur_index = 0, cur_row = 0;
  if (table != nullptr) {
    cur_index = first_key / page_size;
    cur_row = first_key - cur_index * page_size;
  }
'''
LOOK = '''    if (table != nullptr) {
      page = table[cur_index];
'''
for num, slug in [(73, 'trial_one_split_two'), (74, 'trial_two_splits_two'), (75, 'trial_table_shfl')]:
    dst = f'{R}/build-carry/tried/{num}_{slug}'
    shutil.rmtree(dst, ignore_errors=True); os.makedirs(dst)
    for n in ('splits.h', 'row_copy.h', 'decode_rows_tma.cu'):
        s = open(f'{SRC}/{n}').read()
        subs = [('k72_decode_rows_tma', f'k{num}_{slug}'),
                ('kernels/72_decode_rows_tma/', f'kernels/{num}_{slug}/'),
                ('kernel_72()', f'kernel_{num}()'), ('k.number = 72;', f'k.number = {num};'),
                ('k.slug = "decode_rows_tma";', f'k.slug = "{slug}";')]
        if n == 'splits.h' and num == 73:
            subs += [(TWO, '  if (s == 1 && blocks > sms) return 1;\n' + TWO)]
        if n == 'splits.h' and num == 74:
            subs += [(TWO, '  if (s == 1 && blocks > sms && key_tiles >= 2 * kMinTilesToSplit) return 2;\n' + TWO)]
        if n == 'decode_rows_tma.cu' and num == 75:
            subs += [(CUR, CUR + '''  // Trial: a key-warp block's table entries 32 at a time, entry tab_base + lane in each lane.
  const int tab_count = table == nullptr ? 0 : (capacity + page_size - 1) / page_size;
  int tab_base = cur_index, tab_reg = 0;
  if (!kWgmma && table != nullptr && tab_base + lane < tab_count) tab_reg = table[tab_base + lane];
'''), (LOOK, '''    if (table != nullptr) {
      if constexpr (kWgmma) {
        page = table[cur_index];
      } else {
        if (cur_index >= tab_base + 32) {
          tab_base += 32;
          tab_reg = tab_base + lane < tab_count ? table[tab_base + lane] : 0;
        }
        page = __shfl_sync(0xffffffffu, tab_reg, cur_index - tab_base);
      }
''')]
        for a, b in subs:
            if n == 'decode_rows_tma.cu' or n == 'splits.h' and a in (TWO,):
                assert a in s, (num, n, a[:40])
            s = s.replace(a, b)
        s = re.sub(r'k\.title = "[^"]*";', f'k.title = "decode (probe): {slug}";', s)
        open(f'{dst}/{n if n != "decode_rows_tma.cu" else slug + ".cu"}', 'w').write(s)
    print(dst)
