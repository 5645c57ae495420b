// mbarrier: a 64-bit barrier object in shared memory that counts arrivals AND bytes (Hopper's
// completion mechanism for TMA copies), through inline PTX.
//   PTX ISA: "Parallel synchronization and communication instructions: mbarrier" (sm_80+;
//   expect_tx and try_wait.parity with transaction counts: sm_90).
//
// State: a pending-arrival count (reset to the count given at init when a phase completes), a
// transaction count (bytes still expected), and a phase bit. A phase completes when every expected
// arrival has arrived AND the transaction count is back at zero; then the phase bit flips and the
// counts reset for the next phase. Waiting is by parity: try_wait.parity(p) returns true once the
// phase whose parity is p has completed (with p = 0 the first phase, p = 1 the second, p = 0 the
// third ...). A ring stage used for the k-th time (k = 0, 1, ...) waits with parity k % 2.
//   init(bar, n)            n arrivals complete a phase. Then fence_init() and a block barrier
//                           before anyone else uses it. The fence (sm_90) is for barriers that
//                           TMA copies count bytes on; rungs 54-55, whose barriers only the
//                           block's threads and their cp.async arrive on, and which build for
//                           sm_80 too, use the block barrier alone.
//   arrive_expect_tx(bar, b) one arrival, and b more bytes expected in this phase (the TMA
//                           copies that name this barrier count them down as they land).
//   arrive(bar)             one arrival.
//   wait(bar, parity)       spins on try_wait.parity (test_wait.parity before sm_90) until the
//                           phase of that parity completed.
// Wrong parity does not fail: it returns at once on a stale phase (reads data not yet there) or
// hangs. tests/test_hopper_ptx.cu drives a ring through many more uses than stages.
#pragma once

#include <cstdint>

namespace fl::ptx::mbarrier {

__device__ __forceinline__ void init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

// Makes the initialisation visible to the other threads and to the async proxy (TMA) before use.
__device__ __forceinline__ void fence_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

__device__ __forceinline__ void arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

// One probe: true when the phase of parity `parity` has completed. On sm_90 it is try_wait, which
// may suspend the thread for a while (a hardware time limit) before it answers false; before
// sm_90, where try_wait does not exist, test_wait, which answers at once.
__device__ __forceinline__ bool try_wait(uint32_t bar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{\n.reg .pred p;\n"
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
      "mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n"
#else
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
#endif
      "selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
  return done != 0;
}

__device__ __forceinline__ void wait(uint32_t bar, uint32_t parity) {
  while (!try_wait(bar, parity)) {
  }
}

}  // namespace fl::ptx::mbarrier
