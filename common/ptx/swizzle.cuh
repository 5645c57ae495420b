// XOR swizzle of shared-memory tiles whose rows are kHeadDim 16-bit elements (rung 06 onwards).
//
// The problem. Shared memory has 32 banks of 4 bytes; a 16-byte access covers 4 consecutive banks,
// so a 128-byte line holds 8 "bank groups" of 16 bytes. ldmatrix reads each 8x8 matrix as 8 rows
// of 16 bytes, one row address per lane, in one phase. In a plain row-major tile with 128-byte
// rows (d = 64) or 256-byte rows (d = 128), the same column of 8 consecutive rows is the same
// 16-byte chunk of 8 different lines, so all 8 land in the same 4 banks: an 8-way conflict, and
// the phase is replayed 8 times.
//
// The fix. Store logical 16-byte chunk c of row r at physical chunk c ^ (r % 8). The XOR only
// touches the low 3 bits of the chunk index, so it permutes chunks inside each group of 8 and works
// for any multiple of 8 chunks per row (d = 64, 128, 192, 256); rows of 12 (d = 96) take a
// variant, explained above chunk() below. The 8 elements inside a chunk keep their order,
// so a 16-byte access (cp.async, ldmatrix row, 128-bit store) stays one contiguous 16 bytes.
//
// Bank group (= (byte offset / 16) % 8, i.e. banks 4g..4g+3) that holds logical chunk 0 of rows
// 0..7, which is what one ldmatrix phase reads:
//
//     row:                     0  1  2  3  4  5  6  7
//     row-major (unswizzled):  0  0  0  0  0  0  0  0    8 accesses, 1 group  -> 8-way conflict
//     swizzled:                0  1  2  3  4  5  6  7    8 accesses, 8 groups -> conflict-free
//
// and for logical chunk c, the swizzled groups are c^0, c^1, ..., c^7: again all 8 distinct.
//
// Invariants (checked on the host by tests/test_ptx.cu):
//   1. on each row, chunk() is a bijection of the chunk indices 0..n-1 (n = 8, 12, 16, 24): no two
//      logical chunks share a physical slot, nothing is lost;
//   2. any 8 consecutive rows reading the same logical chunk hit 8 distinct 16-byte bank groups;
//   3. a warp writing whole rows with 16-byte stores (2 rows of 16 chunks, or 4 rows of 8) still
//      covers 8 distinct groups per phase of 8 lanes, since a row is a permutation of its chunks;
//      with 12 or 24 chunks a row, a phase that spans two rows takes the last chunks of one and
//      the first of the next, which land in opposite halves of the 8 groups (tested).
#pragma once

namespace fl::swizzle {

constexpr int kChunkElems = 8;   // 16-bit elements per 16-byte chunk
constexpr int kChunkBytes = 16;  // one cp.async / ldmatrix row / 128-bit access

// Physical chunk that holds logical 16-byte chunk `chunk` of row `row`, in rows of `row_chunks`
// chunks: a multiple of 8 (d = 64, 128, 192, 256), or 12 (d = 96).
//
// Rows of 12 chunks (192 bytes) start alternately on a line and half-way through one: the bank
// group of row r's chunk c is (4 (r % 2) + c) % 8 before the swizzle, so 8 rows reading the same
// chunk land in 2 groups. The XOR there takes k = (r / 2) % 4, which permutes the chunks inside
// each group of 4 (12 = 3 x 4: still a bijection of the row). The group of chunk c becomes
// ((c % 4) ^ k) + 4 ((r % 2) ^ ((c / 4) % 2)): its low bits follow r / 2 and its high bit r % 2,
// so for any c, 8 consecutive rows hit 8 distinct groups again.
__host__ __device__ constexpr int chunk(int row, int chunk, int row_chunks = 8) {
  return row_chunks % 8 == 0 ? chunk ^ (row % 8) : chunk ^ (row / 2 % 4);
}

// Element offset of logical (row, col) in a swizzled tile with `row_elems` elements per row
// (row_elems a multiple of 64, i.e. of 8 chunks, or 96). `col` may be any column: its 16-byte
// chunk is permuted, its place inside the chunk is kept.
__host__ __device__ constexpr int offset(int row, int col, int row_elems) {
  return row * row_elems + chunk(row, col / kChunkElems, row_elems / kChunkElems) * kChunkElems +
         col % kChunkElems;
}

// The same offset in bytes, for shared-state-space addresses (smem_addr(tile) + byte_offset).
__host__ __device__ constexpr int byte_offset(int row, int col, int row_elems) {
  return 2 * offset(row, col, row_elems);
}

}  // namespace fl::swizzle
