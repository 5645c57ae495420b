// Shared-memory addresses for PTX operands, and the size of a block's dynamic shared memory.
//   PTX ISA: "Generic addressing", cvta (here through __cvta_generic_to_shared); the special
//   register %dynamic_smem_size (PTX 4.1, every target).
#pragma once

#include <cstdint>

namespace fl::ptx {

// Shared-state-space address of a generic pointer to shared memory (for the PTX operands).
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// The dynamic shared memory the block's launch gave it, in bytes (the launch's third argument,
// or cudaLaunchConfig_t::dynamicSmemBytes): the same for every block of the grid.
__device__ __forceinline__ uint32_t dynamic_smem_size() {
  uint32_t r;
  asm("mov.u32 %0, %%dynamic_smem_size;\n" : "=r"(r));
  return r;
}

}  // namespace fl::ptx
