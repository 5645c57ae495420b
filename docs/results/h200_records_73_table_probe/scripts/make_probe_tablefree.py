# Probe 74 (never a rung): rung 73 whose tile-in-page copies take the page as b * (capacity /
# page_size) + index, the page a pool *in order* holds there, instead of loading table[index]: the
# paged path with no table load. Right only for pools in order (paged_bench --in-order's arms);
# its shuffled arms are wrong and the script says so. Built on the device only.
import os, re, shutil
src = 'kernels/73_decode_rows_unsplit'; dst = 'kernels/74_probe_table_free'
os.makedirs(dst, exist_ok=True)
for f in ('row_copy.h', 'splits.h'):
    shutil.copy(os.path.join(src, f), dst)
s = open(os.path.join(src, 'decode_rows_unsplit.cu')).read()
old = "      page = table[cur_index];\n"
assert s.count(old) == 1
s = s.replace(old, "      page = seq_pages + cur_index;  // probe: no table load\n")
anchor = "  int cur_index = 0, cur_row = 0;\n"
assert s.count(anchor) == 1
s = s.replace(anchor, anchor + "  const int64_t seq_pages = table == nullptr ? 0 : b * (capacity / page_size);  // probe\n")
s = s.replace('k73_decode_rows_unsplit', 'k74_probe_table_free').replace('kernels/73_decode_rows_unsplit/', dst + '/')
s = s.replace('kernel_73()', 'kernel_74()').replace('k.number = 73;', 'k.number = 74;')
s = s.replace('k.slug = "decode_rows_unsplit"', 'k.slug = "probe_table_free"')
open(os.path.join(dst, 'probe_table_free.cu'), 'w').write(s)
for f in ('row_copy.h', 'splits.h'):
    p = os.path.join(dst, f); t = open(p).read().replace('k73_decode_rows_unsplit', 'k74_probe_table_free'); open(p, 'w').write(t)
print('probe written')
