// Shared-memory addresses for PTX operands.
//   PTX ISA: "Generic addressing", cvta (here through __cvta_generic_to_shared).
#pragma once

#include <cstdint>

namespace fl::ptx {

// Shared-state-space address of a generic pointer to shared memory (for the PTX operands).
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

}  // namespace fl::ptx
