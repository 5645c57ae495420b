# Trial 74 (never a rung): rung 73 whose cluster launches with key warps (the one-row blocks),
# on a call with a block table whose tiles lie in one page, copy the split's entries of the table
# into shared memory before the first copy (every thread a few, one trip to the L2, then a block
# barrier); the tiles' copies then read their page from there, not from global memory. At most
# kTableSlots entries (4 KiB past the cluster's mbarrier), else the table as before.
# Trial 74: the table pointer moved to the shared copy (generic loads); trial 75: a branch on
# the copy's presence (a shared load where it is). usage: make_trial_table_smem.py [root]
import os, sys
root = sys.argv[1] if len(sys.argv) > 1 else '.'
for num, slug, form in ((74, 'trial_table_smem', 'generic'), (75, 'trial_table_smem_lds', 'branch')):
  src = 'kernels/73_decode_rows_unsplit'
  ns = 'k%d_%s' % (num, slug); dst = os.path.join(root, 'kernels/%d_%s' % (num, slug))
  os.makedirs(dst, exist_ok=True)
  for f in ('row_copy.h', 'splits.h'):
      t = open(os.path.join(src, f)).read().replace('k73_decode_rows_unsplit', ns)
      open(os.path.join(dst, f), 'w').write(t)
  s = open(os.path.join(src, 'decode_rows_unsplit.cu')).read()
  def rep(old, new):
      global s
      assert s.count(old) == 1, old
      s = s.replace(old, new)
  rep("constexpr int kBarBytes = 16;\n",
      "constexpr int kBarBytes = 16;\nconstexpr int kTableSlots = 1024;  // trial: 4 KiB of table entries\n")
  rep("  return std::max(block_smem<kHeadDim, kBc, kKeyWarps>(), smem_bytes<kHeadDim, kBc>() + kBarBytes);\n",
      "  return std::max(block_smem<kHeadDim, kBc, kKeyWarps>(), smem_bytes<kHeadDim, kBc>() + kBarBytes +\n"
      "                  (kKeyWarps ? 4 * kTableSlots : 0));  // trial\n")
  if form == 'generic':
      rep("  const int32_t* table =\n      p.block_table == nullptr ? nullptr : p.block_table + b * p.block_table_stride;\n",
          "  const int32_t* table =\n      p.block_table == nullptr ? nullptr : p.block_table + b * p.block_table_stride;\n"
          "  int table_base = 0;  // trial: table[i] is s_table[i - table_base]\n")
  else:
      rep("  const int32_t* table =\n      p.block_table == nullptr ? nullptr : p.block_table + b * p.block_table_stride;\n",
          "  const int32_t* table =\n      p.block_table == nullptr ? nullptr : p.block_table + b * p.block_table_stride;\n"
          "  int table_base = 0;  // trial\n  const int32_t* s_table = nullptr;\n")
  fill = """  if constexpr (kCluster && kKeyWarps) {  // trial: the split's entries into shared memory
      if (table != nullptr && tile_in_page && n_tiles > 0) {
        const int last_index = (min(nk, first_key + n_tiles * kBc) - 1) / page_size;
        if (last_index - cur_index < kTableSlots) {
          int32_t* st = reinterpret_cast<int32_t*>(smem + smem_bytes<kHeadDim, kBc>() + kBarBytes);
  #pragma unroll
          for (int k = 0; k < kTableSlots / kThreads; ++k) {
            const int i = threadIdx.x + k * kThreads;
            if (i <= last_index - cur_index) st[i] = table[cur_index + i];
          }
          table_base = cur_index;
          %s
        }
      }
      __syncthreads();
    }
    auto issue_tile = [&](int j) {
  """ % ("table = st - table_base;" if form == 'generic' else "s_table = st;")
  fill = '\n'.join(l[2:] if l.startswith('  ') else l for l in fill.split('\n'))
  fill = '  ' + fill.lstrip(' ')
  rep("  auto issue_tile = [&](int j) {\n", fill)
  if form != 'generic':
      rep("      page = table[cur_index];\n",
          "      page = s_table != nullptr ? s_table[cur_index - table_base] : table[cur_index];\n")
  s = s.replace('k73_decode_rows_unsplit', ns).replace('kernels/73_decode_rows_unsplit/', 'kernels/%d_%s/' % (num, slug))
  rep('kernel_73()', 'kernel_%d()' % num); rep('k.number = 73;', 'k.number = %d;' % num)
  rep('k.slug = "decode_rows_unsplit"', 'k.slug = "%s"' % slug)
  open(os.path.join(dst, slug + '.cu'), 'w').write(s)
  print('written', dst, form)
