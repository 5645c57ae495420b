// stmatrix: a warp stores 8x8 matrices of 16-bit elements from registers to shared memory, the
// inverse of ldmatrix (common/ptx/ldmatrix.cuh).
//   PTX ISA: "Warp-level matrix store instruction: stmatrix" (sm_90).
//
// stmatrix.sync.aligned.m8n8.x4.shared.b16 [addr], {r0, r1, r2, r3}: four 8x8 matrices. Register
// ri of lane l holds row l / 4, columns 2 (l % 4) and 2 (l % 4) + 1 of matrix i (low half first):
// the layout of an mma.sync / wgmma accumulator's 8-column block, converted to 16-bit pairs. Lane
// l gives the shared address of row l % 8 of matrix l / 8 (16 contiguous bytes), so the rows of a
// matrix can be anywhere, e.g. in the 16-byte chunks of a swizzled tile.
#pragma once

#include <cstdint>

namespace fl::ptx {

__device__ __forceinline__ void stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2,
                                            uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr),
               "r"(r0), "r"(r1), "r"(r2), "r"(r3)
               : "memory");
}

// stmatrix.sync.aligned.m8n8.x4.trans.shared.b16: the same registers, each matrix stored
// transposed: register ri's pair (row l / 4, columns 2 (l % 4), + 1 of matrix i) lands in rows
// 2 (l % 4) and 2 (l % 4) + 1, column l / 4; lane l gives the address of row l % 8 of the stored
// (transposed) matrix l / 8. An accumulator held as keys x queries is stored queries x keys.
__device__ __forceinline__ void stmatrix_x4_trans(uint32_t addr, uint32_t r0, uint32_t r1,
                                                  uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(
                   addr),
               "r"(r0), "r"(r1), "r"(r2), "r"(r3)
               : "memory");
}

}  // namespace fl::ptx
