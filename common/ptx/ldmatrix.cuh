// Shared memory -> register fragments through inline PTX.
//   PTX ISA: "Warp-level matrix load instruction: ldmatrix", sm_75+.
// Each of the four 8x8 b16 matrices is addressed by 8 lanes (lanes 8i..8i+7 give the row
// addresses of matrix i, each row 16 contiguous bytes); register i of lane l receives matrix i,
// row l/4, columns 2(l%4) and 2(l%4)+1 (with .trans: row 2(l%4) and 2(l%4)+1, column l/4).
#pragma once

#include <cstdint>

#include "common/ptx/smem.cuh"  // smem_addr

namespace fl::ptx {

// ldmatrix.sync.aligned.m8n8.x4.shared.b16: four 8x8 matrices, one register each.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16: the same, each matrix transposed.
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// ldmatrix.sync.aligned.m8n8.x2.shared.b16: two matrices (lanes 0-15 give the addresses).
__device__ __forceinline__ void ldmatrix_x2(uint32_t (&r)[2], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(addr));
}

// ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16.
__device__ __forceinline__ void ldmatrix_x2_trans(uint32_t (&r)[2], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(addr));
}

}  // namespace fl::ptx
