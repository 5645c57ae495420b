#!/usr/bin/env python3
"""Scratch: add run 119-120's %globaltimer stamps to a rung 23 source (the kernel's or a variant's).
python3 mktrace.py in.cu out.cu"""
import sys
f = open(sys.argv[1]).read()
def rep(a, b):
    global f
    assert f.count(a) == 1, (a[:60], f.count(a))
    f = f.replace(a, b)
rep('#include <climits>\n', '#include <climits>\n#include <cstdio>\n#include <cstdlib>\n#include <vector>\n')
rep('template <int kHeadDim>\n__device__ __forceinline__ void producer(', '''constexpr int kTrSlots = 64;
__device__ unsigned long long g_tr_c[132][kTrSlots][3][8];
__device__ unsigned long long g_tr_p[132][kTrSlots][2];
__device__ unsigned long long g_tr_b[132][3];
__device__ __forceinline__ unsigned long long gtime() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)::"memory");
  return t;
}
#define TR_C(e) do { if (leader && slot < kTrSlots && blockIdx.x < 132) g_tr_c[blockIdx.x][slot][wg][e] = gtime(); } while (0)
#define TR_CS(e, s) do { if (leader && (s) < kTrSlots && blockIdx.x < 132) g_tr_c[blockIdx.x][s][wg][e] = gtime(); } while (0)
#define TR_P(e) do { if (slot < kTrSlots && blockIdx.x < 132) g_tr_p[blockIdx.x][slot][e] = gtime(); } while (0)

template <int kHeadDim>
__device__ __forceinline__ void producer(''')
rep('''      ptx::mbarrier::wait(ptx::smem_addr(&bar.q_empty[qs]), parity(q_use / C::kQStages - 1));
    }
    ++q_use;''', '''      ptx::mbarrier::wait(ptx::smem_addr(&bar.q_empty[qs]), parity(q_use / C::kQStages - 1));
    }
    TR_P(0);
    ++q_use;''')
rep('''      if (use > 0) ptx::mbarrier::wait(ptx::smem_addr(&bar.k_empty[stage]), parity(use - 1));
''', '''      if (use > 0) ptx::mbarrier::wait(ptx::smem_addr(&bar.k_empty[stage]), parity(use - 1));
      if (j == w.n - 1) TR_P(1);
''')
# the consumer's item loop: the kernel's form, or B's (find_next)
if 'const Work w = uniform(next);\n    ++slot;' in f:
    rep('''    const Work w = uniform(next);
    ++slot;''', '''    TR_CS(7, slot);
    const Work w = uniform(next);
    TR_C(0);
    ++slot;''')
    cur = 'slot - 1'
else:
    rep('''  for (unsigned slot = 0; slot < slots; ++slot) {
    const int t = item_of(slot, gridDim.x, blockIdx.x, sched);
    if (t < 0) continue;
    const Work w = work_of<C::kBr, kBc>(t, sched, static_cast<int>(p.heads_q));''', '''  for (unsigned slot = 0; slot < slots; ++slot) {
    TR_C(7);
    const int t = item_of(slot, gridDim.x, blockIdx.x, sched);
    if (t < 0) continue;
    const Work w = work_of<C::kBr, kBc>(t, sched, static_cast<int>(p.heads_q));
    TR_C(0);''')
    cur = 'slot'
T = lambda e: f'TR_CS({e}, {cur});'
rep('''    ptx::mbarrier::wait(ptx::smem_addr(&bar.q_full[q_stage]), parity(q_use / C::kQStages));
    ++q_use;''', f'''    ptx::mbarrier::wait(ptx::smem_addr(&bar.q_full[q_stage]), parity(q_use / C::kQStages));
    {T(1)}
    ++q_use;''')
rep('''    wait_k(k);
    ptx::named_barrier_sync(my_turn, kTurnThreads);
    ptx::wgmma::fence();
    issue_s(static_cast<int>(k % kStages));''', f'''    wait_k(k);
    {T(2)}
    ptx::named_barrier_sync(my_turn, kTurnThreads);
    {T(3)}
    ptx::wgmma::fence();
    issue_s(static_cast<int>(k % kStages));''')
rep('''    ptx::wgmma::wait_group<0>();
    ptx::wgmma::fence_operands(rS);
    release_k(k);
    if (n == 1''', f'''    ptx::wgmma::wait_group<0>();
    {T(4)}
    ptx::wgmma::fence_operands(rS);
    release_k(k);
    if (n == 1''')
rep('''    ptx::wgmma::wait_group<0>();
    ptx::wgmma::fence_operands(rO);
    fence_p();
    release_v(k_last);''', f'''    ptx::wgmma::wait_group<0>();
    {T(5)}
    ptx::wgmma::fence_operands(rO);
    fence_p();
    release_v(k_last);''')
rep('''    pack_o();
    if constexpr (kDeferEpilogue) {''', f'''    pack_o();
    {T(6)}
    if constexpr (kDeferEpilogue) {{''')
rep('''  flush();
  // The last consumer handed''', '''  flush();
  if (leader && blockIdx.x < 132) g_tr_b[blockIdx.x][1 + wg] = gtime();
  // The last consumer handed''')
rep('''  if (threadIdx.x == 0) {
    ptx::tma::prefetch_map(&tmQ);''', '''  if (threadIdx.x == 0 && blockIdx.x < 132) g_tr_b[blockIdx.x][0] = gtime();
  if (threadIdx.x == 0) {
    ptx::tma::prefetch_map(&tmQ);''')
host = open(__file__.replace('mktrace.py', 'v119/final_hopper.cu')).read()
a = host.index('      const char* trace = std::getenv("FL23_TRACE");')
b = host.index('\n      }\n', host.index('std::fclose(out);')) + len('\n      }')
hb = host[a:b]
rep('''      attention_kernel<T, kHeadDim><<<blocks, C::kThreads, C::kSmemBytes, stream>>>(
          p, sched, tmQ, tmK, tmV, tmO, tmOFirst);''', hb)
open(sys.argv[2], 'w').write(f)
