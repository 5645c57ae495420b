# Makes this session's trial rungs from rung 66 (copies, renamed, one edit each). Not kept.
import os, re, shutil, sys
R = '/work/main'
SRC = f'{R}/kernels/66_decode_half_grid'
def make(num, slug, title, edits_splits, edits_cu):
    dst = f'{R}/build-carry/tried/{num}_{slug}'
    shutil.rmtree(dst, ignore_errors=True); os.makedirs(dst)
    s = open(f'{SRC}/splits.h').read()
    c = open(f'{SRC}/decode_half_grid.cu').read()
    for a, b in [('k66_decode_half_grid', f'k{num}_{slug}'),
                 ('kernels/66_decode_half_grid/', f'kernels/{num}_{slug}/'),
                 ('docs/kernels/66_decode_half_grid.md', f'docs/kernels/{num}_{slug}.md'),
                 ('kernel_66()', f'kernel_{num}()'), ('k.number = 66;', f'k.number = {num};'),
                 ('k.slug = "decode_half_grid";', f'k.slug = "{slug}";')]:
        assert a in s or a in c, a
        s = s.replace(a, b); c = c.replace(a, b)
    c = re.sub(r'k\.title = "[^"]*";', f'k.title = "{title}";', c)
    for a, b in edits_splits:
        assert s.count(a) == 1, a; s = s.replace(a, b)
    for a, b in edits_cu:
        assert c.count(a) == 1, a; c = c.replace(a, b)
    open(f'{dst}/splits.h', 'w').write(s)
    open(f'{dst}/{slug}.cu', 'w').write(c)
    print('made', dst)

SF_OLD = '''  const int waves = choose_splits(blocks, f.sms, split_slots_per_sm(kTileBytes, f.blocks_per_sm),
                                  tiles, cut_pct(kTileBytes));
  return price_splits(waves, blocks, f.sms, tiles, kTileBytes,
                      p.seqlen_q * (p.heads_q / p.heads_kv), f.blocks_per_sm);'''
LAUNCH_OLD = '''  const int split_smem = split_launch_smem(int64_t{2} * kBc * kHeadDim * 2,'''

# A: d = 96 blocks of one warp of rows count one slot an SM (waves' count, price, launch alone);
# the ring keeps 4 stages.
SLOT = '''constexpr int64_t slot_bytes(int64_t head_dim, bool key_warps, int64_t tile_bytes) {
  return head_dim == 96 && key_warps ? kBigTileBytes : tile_bytes;
}
inline int split_slots_per_sm('''
make(67, 'trial_slot96', 'decode (trial): d = 96 blocks of one warp of rows one slot an SM',
     [('inline int split_slots_per_sm(', SLOT)],
     [(SF_OLD, '''  constexpr int64_t kSlotBytes = slot_bytes(kHeadDim, kKeyWarps, kTileBytes);
  const int waves = choose_splits(blocks, f.sms, split_slots_per_sm(kSlotBytes, f.blocks_per_sm),
                                  tiles, cut_pct(kTileBytes));
  return price_splits(waves, blocks, f.sms, tiles, kTileBytes,
                      p.seqlen_q * (p.heads_q / p.heads_kv),
                      split_slots_per_sm(kSlotBytes, f.blocks_per_sm));'''),
      (LAUNCH_OLD, '''  const int split_smem = split_launch_smem(slot_bytes(kHeadDim, kKeyWarps, int64_t{2} * kBc * kHeadDim * 2),''')])

# F: rung 66 with the count of a d = 96 call forced by FL_TRIAL_SPLITS, and the split launch
# alone where FL_TRIAL_ALONE is set (a probe, never a rung).
make(69, 'trial_force96', 'decode (trial): d = 96 split count forced from the environment',
     [],
     [('#include <cstdint>\n', '#include <cstdint>\n#include <cstdlib>\n'),
      (SF_OLD, '''  if (kHeadDim == 96) {
    if (const char* e = std::getenv("FL_TRIAL_SPLITS")) return std::atoi(e);
  }
''' + SF_OLD),
      (LAUNCH_OLD, '''  const int split_smem = kHeadDim == 96 && splits > 1 && std::getenv("FL_TRIAL_ALONE")
                             ? device_figures<T, kHeadDim, kBc, kKeyWarps>().alone
                             : split_launch_smem(int64_t{2} * kBc * kHeadDim * 2,''')])
