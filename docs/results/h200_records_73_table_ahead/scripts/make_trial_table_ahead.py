# Trial 74 (never a rung): rung 73 whose copies of a tile in one page, each time they read the
# block table's entry, ask the L1 for the entry 32 ahead (one 128-byte line of entries), clamped
# to the sequence's row of the table: the next line is in the L1 when the cursor reaches it.
# Built on the device only.
import os, shutil
src = 'kernels/73_decode_rows_unsplit'; dst = 'kernels/74_trial_table_ahead'
os.makedirs(dst, exist_ok=True)
for f in ('row_copy.h', 'splits.h'):
    t = open(os.path.join(src, f)).read().replace('k73_decode_rows_unsplit', 'k74_trial_table_ahead')
    open(os.path.join(dst, f), 'w').write(t)
s = open(os.path.join(src, 'decode_rows_unsplit.cu')).read()
old = "      page = table[cur_index];\n"
assert s.count(old) == 1
s = s.replace(old, old + "      {  // trial: the entry 32 ahead, into the L1\n"
              "        const int32_t* ahead = table + min(cur_index + 32, last_index);\n"
              "        asm volatile(\"prefetch.global.L1 [%0];\\n\" ::\"l\"(ahead));\n"
              "      }\n")
anchor = "  int cur_index = 0, cur_row = 0;\n"
assert s.count(anchor) == 1
s = s.replace(anchor, anchor + "  const int last_index = table == nullptr ? 0 : (capacity - 1) / page_size;  // trial\n")
s = s.replace('k73_decode_rows_unsplit', 'k74_trial_table_ahead').replace('kernels/73_decode_rows_unsplit/', dst + '/')
s = s.replace('kernel_73()', 'kernel_74()').replace('k.number = 73;', 'k.number = 74;')
s = s.replace('k.slug = "decode_rows_unsplit"', 'k.slug = "trial_table_ahead"')
open(os.path.join(dst, 'trial_table_ahead.cu'), 'w').write(s)
print('trial written')
