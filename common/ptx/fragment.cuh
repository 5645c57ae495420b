// Which lane of a warp holds which element of an mma.sync.m16n8k16 fragment (16-bit inputs,
// f32 accumulators). PTX ISA: "Matrix fragments for mma.m16n8k16 with floating point type".
// These functions are the executable form of the figures in the PTX ISA: the kernels' index
// arithmetic follows them, tests/test_ptx.cu checks the hardware against them, and
// scripts/fragment_figure.py draws them for the docs.
//
//   lane = 4 * group + quad   (group = lane / 4 in 0..7, quad = lane % 4 in 0..3)
//
//   A (16x16, row-major), 4 registers of 2 halves, element e in {0, 1} of register r:
//     row = group + 8 * (r % 2),  col = 2 * quad + e + 8 * (r / 2)
//   B (16x8, "col": K x N, column-major), 2 registers of 2 halves:
//     k   = 2 * quad + e + 8 * r,  n = group
//   C/D (16x8, f32), 4 floats, element i:
//     row = group + 8 * (i / 2),   col = 2 * quad + i % 2
#pragma once

namespace fl::frag {

struct RowCol {
  int row, col;
};

// A operand: register r (0..3), half e (0..1) of `lane`.
__host__ __device__ constexpr RowCol a_m16k16(int lane, int r, int e) {
  return {lane / 4 + 8 * (r % 2), 2 * (lane % 4) + e + 8 * (r / 2)};
}

// B operand: register r (0..1), half e (0..1) of `lane`; row = k, col = n.
__host__ __device__ constexpr RowCol b_k16n8(int lane, int r, int e) {
  return {2 * (lane % 4) + e + 8 * r, lane / 4};
}

// Accumulator: float i (0..3) of `lane`.
__host__ __device__ constexpr RowCol c_m16n8(int lane, int i) {
  return {lane / 4 + 8 * (i / 2), 2 * (lane % 4) + i % 2};
}

// ldmatrix (non-transposed): register i of `lane`, half e, as (row, col) inside matrix i.
__host__ __device__ constexpr RowCol ldmatrix_m8n8(int lane, int e) {
  return {lane / 4, 2 * (lane % 4) + e};
}

// ldmatrix .trans: register i of `lane`, half e, as (row, col) of the matrix in shared memory.
__host__ __device__ constexpr RowCol ldmatrix_m8n8_trans(int lane, int e) {
  return {2 * (lane % 4) + e, lane / 4};
}

}  // namespace fl::frag
