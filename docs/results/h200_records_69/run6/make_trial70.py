# Trial (not a rung): rung 69 whose d = 128 blocks of more than 16 rows read tiles of 32 keys in
# three stages (64 KiB a block) under __launch_bounds__(128, 3): three blocks an SM, their count
# the waves of the blocks an SM holds, cut back until each split reads 512 KiB; no cluster.
import os, re, shutil
R = '.'  # the repository root
SRC = f'{R}/kernels/69_decode_rows_two'
num, slug = 70, 'trial_rows_three'
dst = f'{R}/build-carry/tried/{num}_{slug}'
shutil.rmtree(dst, ignore_errors=True); os.makedirs(dst)
files = {n: open(f'{SRC}/{n}').read() for n in ('splits.h', 'row_copy.h', 'decode_rows_two.cu')}
for n in files:
    s = files[n]
    for a, b in [('k69_decode_rows_two', f'k{num}_{slug}'),
                 ('kernels/69_decode_rows_two/', f'kernels/{num}_{slug}/'),
                 ('docs/kernels/69_decode_rows_two.md', f'docs/kernels/{num}_{slug}.md'),
                 ('kernel_69()', f'kernel_{num}()'), ('k.number = 69;', f'k.number = {num};'),
                 ('k.slug = "decode_rows_two";', f'k.slug = "{slug}";')]:
        s = s.replace(a, b)
    files[n] = s
c = files['decode_rows_two.cu']
c = re.sub(r'k\.title = "[^"]*";', 'k.title = "decode (trial): blocks of many rows three an SM";', c)
edits = [
 ('  return ring_stages(int64_t{2} * kBc * kHeadDim * 2);',
  '  return kBc == 32 ? 3 : ring_stages(int64_t{2} * kBc * kHeadDim * 2);'),
 ('__global__ void __launch_bounds__(kThreads)\n    decode_kernel(',
  '__global__ void __launch_bounds__(kThreads, kHeadDim == 128 && !kKeyWarps ? 3 : 1)\n    decode_kernel('),
 ('''    if (!key_warps(p)) {
      f(d, std::false_type{}, Keys64{});
      return;
    }''', '''    if (!key_warps(p)) {
      if constexpr (decltype(d)::value == 128) {
        f(d, std::false_type{}, std::integral_constant<int, 32>{});
      } else {
        f(d, std::false_type{}, Keys64{});
      }
      return;
    }'''),
 ('''  if (refusal.empty() || keys == 64) return refusal;''', '''  if (refusal.empty() || keys <= 64) return refusal;'''),
 ('''          tile_keys(p.head_dim, rows <= 16, p.page_size)};''',
  '''          rows > 16 && p.head_dim == 128 ? 32 : tile_keys(p.head_dim, rows <= 16, p.page_size)};'''),
 ('''  // Rung 69: a block of many rows, two an SM where its chunks stay long.
  if (const int two''', '''  if constexpr (!kKeyWarps && kHeadDim == 128) {  // trial: the blocks an SM holds, 512 KiB
    int s = choose_splits(blocks, f.sms, f.blocks_per_sm, tiles, 60);
    while (s > 1 && (tiles + s - 1) / s * kTileBytes < kTwoChunkBytes) --s;
    return s;
  }
  // Rung 69: a block of many rows, two an SM where its chunks stay long.
  if (const int two'''),
 ('''bool merges_in_cluster(const AttnParams& p, int splits) {
  const Figures f''', '''bool merges_in_cluster(const AttnParams& p, int splits) {
  if constexpr (!kKeyWarps && kHeadDim == 128) return false;  // trial: no cluster
  const Figures f'''),
 ('''  static_assert(cluster_bytes<kHeadDim>() <= kSmem, "merge_key_warps' and the cluster's buffers");''',
  '''  static_assert(kBc == 32 || cluster_bytes<kHeadDim>() <= kSmem,
                "merge_key_warps' and the cluster's buffers");'''),
 ('''  const bool two = two_slot_splits(''', '''  const bool two = (!kKeyWarps && kHeadDim == 128) || two_slot_splits('''),
]
for a, b in edits:
    assert c.count(a) == 1, a
    c = c.replace(a, b)
files['decode_rows_two.cu'] = c
open(f'{dst}/splits.h', 'w').write(files['splits.h'])
open(f'{dst}/row_copy.h', 'w').write(files['row_copy.h'])
open(f'{dst}/{slug}.cu', 'w').write(c)
print('made', dst)
