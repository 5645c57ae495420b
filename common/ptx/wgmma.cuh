// Warpgroup matrix multiply-accumulate (Hopper, sm_90a) through inline PTX.
//   PTX ISA: "Asynchronous warpgroup level matrix multiply-accumulate" (wgmma.mma_async,
//   wgmma.fence, wgmma.commit_group, wgmma.wait_group). sm_90a only: build with
//   -gencode=arch=compute_90a,code=sm_90a. In SASS the multiply shows as HGMMA.
//
// A warpgroup is 4 consecutive warps (128 threads, the first warp's index a multiple of 4). One
// wgmma.mma_async.m64nNk16 computes D(64 x N, fp32) (+)= A(64 x 16) * B(16 x N) for the whole
// warpgroup, N a multiple of 8 up to 256:
//   - B always comes from shared memory, named by a 64-bit matrix descriptor
//     (common/ptx/gmma_desc.cuh). Its natural layout is K-major (the 16 k of one column n
//     contiguous, "B transposed" in row-major terms); the transpose bit (kTransB = 1) reads an
//     MN-major B instead (the N values of one k contiguous), for 16-bit types only.
//   - A comes from shared memory (SS, a descriptor, K-major here) or from registers (RS).
//   - D lives in registers, N/2 fp32 a thread, and is read-modify-written in place.
//
// Which thread holds which element of D (the accumulator, and also the layout of S in
// attention): warp w of the warpgroup (w = (thread / 32) % 4) owns rows 16w..16w+15; in it, lane l
// = 4 group + quad holds, for each 8-column block b = 0 .. N/8 - 1,
//   d[4b + 0], d[4b + 1]  = D[16w + group    ][8b + 2 quad], D[16w + group    ][8b + 2 quad + 1]
//   d[4b + 2], d[4b + 3]  = D[16w + group + 8][8b + 2 quad], D[16w + group + 8][8b + 2 quad + 1]
// that is, per 8-column block, exactly mma.sync's m16n8 C fragment (common/ptx/fragment.cuh).
// The RS A operand of one k16 step is, per warp, mma.sync's m16k16 A fragment of the warp's 16
// rows: a[0] = (row group, k 2quad, +1), a[1] = (row group + 8, k 2quad, +1), a[2] = (row group,
// k 8 + 2quad, +1), a[3] = (row group + 8, k 8 + 2quad, +1), two 16-bit values per register, the
// lower k in the low half. So the accumulator blocks 2s and 2s + 1 of S, rounded to 16 bits and
// packed in pairs, ARE the A operand of k-step s of P·V: no shared-memory round trip.
//
// The asynchronous protocol (per warpgroup, every thread executes each instruction):
//   fence()          wgmma.fence.sync.aligned: orders earlier register writes (the accumulator,
//                    an RS A operand) before the wgmma that reads them. Needed before the first
//                    wgmma of a batch whenever ordinary code touched those registers.
//   ss()/rs() ...    wgmma.mma_async: issued, not finished. Until the wait below, the
//                    accumulator registers must not be read or written by other instructions
//                    (ptxas would serialise the wgmmas: warning C7515, treated as an error here).
//   commit_group()   wgmma.commit_group.sync.aligned: closes the batch issued since the last one.
//   wait_group<n>()  wgmma.wait_group.sync.aligned n: waits until at most n batches are pending.
//   fence_operands() an empty asm that "reads and writes" each accumulator register, so that the
//                    compiler cannot move an ordinary use of them above the wait (registers are
//                    not memory: the wait's "memory" clobber alone does not pin them).
// 8-bit inputs (fp8 e4m3, for rung 28): wgmma.mma_async.m64nNk32.f32.e4m3.e4m3, k = 32 one-byte
// elements per instruction, i.e. the same 32 bytes of a K-major 128-byte row as a 16-bit k16 step:
// the descriptors and their k-step advance (32 bytes) are unchanged. Both operands must be
// K-major (no transpose immediates exist for 8-bit types). D's layout is as above. The RS A
// operand is, per warp, mma.sync's m16n8k32 A fragment for 8-bit types: a[0] = (row group,
// k 4quad .. 4quad + 3), a[1] = (row group + 8, same k), a[2] = (row group, k 16 + 4quad ..),
// a[3] = (row group + 8, k 16 + 4quad ..), four elements per register, the lowest k in the lowest
// byte (the PTX ISA's layout; tests/test_hopper_ptx.cu, WgmmaE4m3.*, checks it, and had not run
// on a GPU when this was written). Unlike the 16-bit case, two accumulator blocks of S are not
// this layout (a thread holds columns 2quad, 2quad + 1 of each 8-column block, and needs 4quad ..
// 4quad + 3): either P is exchanged between the threads of a quad, or the keys of V are permuted
// to match what each thread holds (WgmmaE4m3.PVFromAccumulatorLayoutWithPermutedKeys).
// Accumulate = 0 on the first k-step overwrites D (D = A B, the scale-d predicate) instead of
// zeroing the registers with ordinary moves, which is what makes ptxas serialise.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

namespace fl::ptx::wgmma {

__device__ __forceinline__ void fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}

__device__ __forceinline__ void commit_group() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

template <int N>
__device__ __forceinline__ void wait_group() {
  static_assert(N >= 0 && N <= 7, "wgmma.wait_group takes 0..7");
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// Pins each register of `r` at this point of the instruction stream (see the banner).
template <int kCount>
__device__ __forceinline__ void fence_operands(float (&r)[kCount]) {
#pragma unroll
  for (int i = 0; i < kCount; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
template <int kCount>
__device__ __forceinline__ void fence_operands(uint32_t (&r)[kCount]) {
#pragma unroll
  for (int i = 0; i < kCount; ++i) asm volatile("" : "+r"(r[i])::"memory");
}

// Wgmma<T, N>::ss<kTransB>(d, desc_a, desc_b, accumulate)   D (+)= A(smem) B(smem)
// Wgmma<T, N>::rs<kTransB>(d, a, desc_b, accumulate)        D (+)= A(registers) B(smem)
// T = __half or __nv_bfloat16 (the type of A and B; D is fp32), N in {16, 64, 80, 96, 128,
// 192, 256}; or __nv_fp8_e4m3 (k32; kTransB must be 0).
// accumulate = 0: D = A B; 1: D += A B. Scale factors of A and B are +1.
template <typename T, int N>
struct Wgmma;

#define FL_WGMMA_ACC8(d, i)                                                           \
  "+f"(d[(i) + 0]), "+f"(d[(i) + 1]), "+f"(d[(i) + 2]), "+f"(d[(i) + 3]), "+f"(d[(i) + 4]), \
      "+f"(d[(i) + 5]), "+f"(d[(i) + 6]), "+f"(d[(i) + 7])
#include "common/ptx/wgmma_ops.inc"
#undef FL_WGMMA_ACC8

}  // namespace fl::ptx::wgmma
