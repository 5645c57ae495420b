# Scratch (not committed): the multicast experiment built from the tree's rung 23.
import sys
src, dst = sys.argv[1], sys.argv[2]
s = open(src).read()
def rep(old, new, cnt=1):
    global s
    assert s.count(old) == cnt, (old, s.count(old))
    s = s.replace(old, new)
rep('''namespace gmma = ptx::gmma;
''', '''namespace gmma = ptx::gmma;

// ---- experiment: clusters of two, K/V halves multicast (not committed) ----
#ifndef M_STAGES
#define M_STAGES 3
#endif
constexpr int kCluster = 2;
__device__ __forceinline__ uint32_t cl_rank() { uint32_t r; asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r)); return r; }
__device__ __forceinline__ int cl_id() { int r; asm volatile("mov.u32 %0, %%clusterid.x;" : "=r"(r)); return r; }
__device__ __forceinline__ int cl_count() { int r; asm volatile("mov.u32 %0, %%nclusterid.x;" : "=r"(r)); return r; }
__device__ __forceinline__ void cl_sync() { asm volatile("barrier.cluster.arrive.release;\\nbarrier.cluster.wait.acquire;" ::: "memory"); }
__device__ __forceinline__ void arrive_cluster(uint32_t bar, uint32_t cta) {
  asm volatile("{\\n.reg .b32 remote;\\nmapa.shared::cluster.u32 remote, %0, %1;\\n"
               "mbarrier.arrive.shared::cluster.b64 _, [remote];\\n}\\n" ::"r"(bar), "r"(cta) : "memory");
}
__device__ __forceinline__ void load_4d_multicast(uint32_t dst, const void* map, uint32_t bar, uint16_t mask,
                                                  int c0, int c1, int c2, int c3) {
  asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
               " [%0], [%1, {%4, %5, %6, %7}], [%2], %3;\\n" ::"r"(dst), "l"(reinterpret_cast<uint64_t>(map)),
               "r"(bar), "h"(mask), "r"(c0), "r"(c1), "r"(c2), "r"(c3) : "memory");
}
''')
rep('''constexpr int kRingStages = 2;  // stages of the K ring and of the V ring (rung 22's), every d''',
    '''constexpr int kRingStages = M_STAGES;''')
rep('''  static constexpr int kStages = kRingStages;''', '''  static constexpr int kStages = kHeadDim == 128 ? kRingStages : 2;''')
rep('''// One KV tile of the online softmax''', '''template <int kHeadDim, int kRows>
__device__ __forceinline__ void load_half_multicast(uint8_t* sTile, const CUtensorMap* map, uint32_t bar,
                                                    uint32_t rank, int row, int head, int batch) {
  const int half = static_cast<int>(rank) * (kRows / 2);
#pragma unroll
  for (int blk = 0; blk < kHeadDim / 64; ++blk) {
    load_4d_multicast(ptx::smem_addr(sTile) + blk * kRows * 128 + half * 128, map, bar, 3, 64 * blk,
                      row + half, head, batch);
  }
}

// One KV tile of the online softmax''')
rep('''  const unsigned slots = slot_count(gridDim.x, sched);
  for (unsigned slot = 0; slot < slots; ++slot) {
    const int t = item_of(slot, gridDim.x, blockIdx.x, sched);
    if (t < 0) continue;''', '''  const unsigned clusters = cl_count(), cid = cl_id(), rank = cl_rank();
  for (unsigned round = 0; round * clusters < static_cast<unsigned>(sched.units); ++round) {
    const unsigned pp = round * clusters + (round % 2 == 0 ? cid : clusters - 1 - cid);
    if (pp >= static_cast<unsigned>(sched.units)) continue;
    const int t = static_cast<int>(2 * pp + rank);''', 2)
rep('''      load_tile<kHeadDim, C::kBc>(sK + stage * C::tile_bytes(C::kBc), tmK,
                                  ptx::smem_addr(&bar.k_full[stage]), j * C::kBc, head_kv, w.batch);''',
'''      load_half_multicast<kHeadDim, C::kBc>(sK + stage * C::tile_bytes(C::kBc), tmK,
                                  ptx::smem_addr(&bar.k_full[stage]), rank, j * C::kBc, head_kv, w.batch);''')
rep('''      load_tile<kHeadDim, C::kBc>(sV + stage * C::tile_bytes(C::kBc), tmV,
                                  ptx::smem_addr(&bar.v_full[stage]), j * C::kBc, head_kv, w.batch);''',
'''      load_half_multicast<kHeadDim, C::kBc>(sV + stage * C::tile_bytes(C::kBc), tmV,
                                  ptx::smem_addr(&bar.v_full[stage]), rank, j * C::kBc, head_kv, w.batch);''')
rep('''    if (leader) ptx::mbarrier::arrive(ptx::smem_addr(&bar.k_empty[k % kStages]));''',
    '''    if (leader) { arrive_cluster(ptx::smem_addr(&bar.k_empty[k % kStages]), 0); arrive_cluster(ptx::smem_addr(&bar.k_empty[k % kStages]), 1); }''')
rep('''    if (leader) ptx::mbarrier::arrive(ptx::smem_addr(&bar.v_empty[k % kStages]));''',
    '''    if (leader) { arrive_cluster(ptx::smem_addr(&bar.v_empty[k % kStages]), 0); arrive_cluster(ptx::smem_addr(&bar.v_empty[k % kStages]), 1); }''')
rep('''__global__ void __launch_bounds__(Config<kHeadDim>::kThreads, 1)''', '''__global__ void __cluster_dims__(kCluster, 1, 1) __launch_bounds__(Config<kHeadDim>::kThreads, 1)''')
rep('''      ptx::mbarrier::init(ptx::smem_addr(&bar.k_empty[s]), C::kConsumers);''', '''      ptx::mbarrier::init(ptx::smem_addr(&bar.k_empty[s]), kCluster * C::kConsumers);''')
rep('''      ptx::mbarrier::init(ptx::smem_addr(&bar.v_empty[s]), C::kConsumers);''', '''      ptx::mbarrier::init(ptx::smem_addr(&bar.v_empty[s]), kCluster * C::kConsumers);''')
rep('''    ptx::mbarrier::fence_init();
  }
  __syncthreads();''', '''    ptx::mbarrier::fence_init();
  }
  cl_sync();''')
rep('''    consumer<T, kHeadDim>(p, sched, wg - 1, &tmO, sQ, sK, sV, sO, bar);
  }
}''', '''    consumer<T, kHeadDim>(p, sched, wg - 1, &tmO, sQ, sK, sV, sO, bar);
  }
  cl_sync();
}''')
rep('''  const int64_t br = tile(p).br;''', '''  const int64_t br = tile(p).br;
  if (p.causal || ((p.seqlen_q + br - 1) / br) % 2 != 0) return "experiment: non-causal, an even number of query tiles";''')
rep('''      const unsigned blocks = static_cast<unsigned>(sms < sched.units ? sms : sched.units);''', '''      Schedule sc = sched;
      sc.units = sched.count / 2;
      const unsigned clusters = static_cast<unsigned>(sms / 2 < sc.units ? sms / 2 : sc.units);
      const unsigned blocks = 2 * clusters;''')
rep('''<<<blocks, C::kThreads, C::kSmemBytes, stream>>>(p, sched, tmQ, tmK, tmV, tmO);''', '''<<<blocks, C::kThreads, C::kSmemBytes, stream>>>(p, sc, tmQ, tmK, tmV, tmO);''')
rep('''                                                 p.k_stride, C::kBc);''', '''                                                 p.k_stride, C::kBc / 2);''')
rep('''                                                 p.v_stride, C::kBc);''', '''                                                 p.v_stride, C::kBc / 2);''')
open(dst, 'w').write(s)
