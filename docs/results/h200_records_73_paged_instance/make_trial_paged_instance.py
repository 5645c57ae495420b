# Trials 74 and 75 (never rungs): rung 73 whose cluster launches of a call with a block table run
# an instance of their own (decode_kernel's kPaged = true: the table is known to be there), so
# that the paged path's code cannot reshape the contiguous one's (kPaged = false is rung 73's
# source, compiled alike). Trial 75: that alone. Trial 74: and, before the first copy, every
# thread asks the L1 for one 128-byte line of the table the split's tiles will read (a predicated
# prefetch, no loop, no branch; the first 128 lines). usage: make_trial_paged_instance.py [root]
import os, sys
root = sys.argv[1] if len(sys.argv) > 1 else '.'
src = 'kernels/73_decode_rows_unsplit'
for num, slug, prefetch in ((74, 'trial_paged_prefetch', True), (75, 'trial_paged_instance', False)):
    ns = 'k%d_%s' % (num, slug)
    dst = os.path.join(root, 'kernels/%d_%s' % (num, slug))
    os.makedirs(dst, exist_ok=True)
    for f in ('row_copy.h', 'splits.h'):
        t = open(os.path.join(src, f)).read().replace('k73_decode_rows_unsplit', ns)
        open(os.path.join(dst, f), 'w').write(t)
    s = open(os.path.join(src, 'decode_rows_unsplit.cu')).read()
    def rep(old, new):
        global s
        assert s.count(old) == 1, old
        s = s.replace(old, new)
    rep("template <typename T, int kHeadDim, int kBc, bool kKeyWarps, bool kCluster>\n__global__",
        "template <typename T, int kHeadDim, int kBc, bool kKeyWarps, bool kCluster, bool kPaged = false>\n__global__")
    rep("  const int32_t* table =\n      p.block_table == nullptr ? nullptr : p.block_table + b * p.block_table_stride;\n",
        "  const int32_t* table = kPaged ? p.block_table + b * p.block_table_stride  // trial\n"
        "      : p.block_table == nullptr ? nullptr : p.block_table + b * p.block_table_stride;\n")
    if prefetch:
        rep("  auto issue_tile = [&](int j) {\n",
            "  if (kPaged && n_tiles > 0) {  // trial: the split's lines of the table, into the L1\n"
            "    const int last_index = (min(nk, first_key + n_tiles * kBc) - 1) / page_size;\n"
            "    const uintptr_t from = reinterpret_cast<uintptr_t>(table + cur_index) & ~uintptr_t(127);\n"
            "    const uintptr_t to = reinterpret_cast<uintptr_t>(table + last_index);\n"
            "    const uintptr_t at = from + 128 * threadIdx.x;  // one line a thread\n"
            "    asm volatile(\"{\\n .reg .pred p;\\n setp.le.u64 p, %0, %1;\\n @p prefetch.global.L1 [%0];\\n}\\n\"\n"
            "                 ::\"l\"(at), \"l\"(to));\n"
            "  }\n"
            "  auto issue_tile = [&](int j) {\n")
    rep("    kernel = decode_kernel<T, kHeadDim, kBc, kKeyWarps, true>;\n",
        "    kernel = decode_kernel<T, kHeadDim, kBc, kKeyWarps, true>;\n"
        "    if (p.block_table != nullptr) {  // trial: the paged instance\n"
        "      kernel = decode_kernel<T, kHeadDim, kBc, kKeyWarps, true, true>;\n"
        "      FL_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,\n"
        "                                         cluster_smem<kHeadDim, kBc, kKeyWarps>()));\n"
        "    }\n")
    s = s.replace('k73_decode_rows_unsplit', ns).replace('kernels/73_decode_rows_unsplit/', 'kernels/%d_%s/' % (num, slug))
    rep('kernel_73()', 'kernel_%d()' % num); rep('k.number = 73;', 'k.number = %d;' % num)
    rep('k.slug = "decode_rows_unsplit"', 'k.slug = "%s"' % slug)
    open(os.path.join(dst, slug + '.cu'), 'w').write(s)
    print('written', dst)
