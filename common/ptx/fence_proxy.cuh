// The proxy fence between ordinary shared-memory accesses and the async proxy (wgmma, TMA).
//   PTX ISA: "Memory consistency model: proxies", "membar/fence: fence.proxy.async" (sm_90).
//
// wgmma reads its shared-memory operands and TMA reads/writes shared memory through the "async
// proxy"; st.shared, ldmatrix, stmatrix and cp.async (non-bulk) go through the generic proxy.
// Writes made through one proxy are not ordered with accesses through the other by a barrier
// alone: a thread whose ordinary writes (cp.async results after its wait_group included) are read
// next by a wgmma or a TMA store executes fence.proxy.async.shared::cta, then the block barrier.
#pragma once

namespace fl::ptx {

__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

}  // namespace fl::ptx
