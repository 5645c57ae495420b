// The shared-memory matrix descriptor of wgmma (Hopper), and the 128-byte swizzled tile it names.
//   PTX ISA: "Matrix Descriptor Format" (wgmma), "Shared memory matrix layout" (swizzling modes).
// Host and device: the encoding is plain arithmetic, tested on the CPU (tests/test_hopper_ptx.cu).
//
// A descriptor is 64 bits:
//
//    63 62 | 61 ... 52 | 51 50 49 | 48 47 46 | 45 ............ 32 | 31 30 | 29 ............ 16 | 15 14 | 13 ............. 0
//   layout |     0     |base off.|    0     |  SBO >> 4 (14 bit) |   0   |  LBO >> 4 (14 bit) |   0   | start addr >> 4
//
//   start address  the tile's shared-memory address (a .shared window offset), >> 4
//   LBO            "leading dimension byte offset", >> 4 (meaning below)
//   SBO            "stride dimension byte offset", >> 4 (meaning below)
//   base offset    0 when the swizzle pattern starts on a 1024-byte boundary (every tile here)
//   layout         0 no swizzle, 1 128-byte swizzle, 2 64-byte, 3 32-byte
//
// The one layout of the ladder's Hopper rungs: 16-bit elements, tiles of R rows x 64 columns, a
// row 128 bytes, 16-byte chunk c of row r stored at chunk c ^ (r % 8) of that row (the 128-byte
// swizzle; what TMA's CU_TENSOR_MAP_SWIZZLE_128B writes), the tile 1024-byte aligned. A d = 128
// tile is two such blocks, columns 0-63 then 64-127, R x 128 bytes apart (sw128_offset below).
// The same bytes serve as either operand kind:
//   - K-major (Q and K in S = Q·Kᵀ: the k = d dims of a row contiguous). SBO = 1024 bytes, the
//     step from one 8-row group to the next; LBO unused with this swizzle (encoded as 1). k-step
//     s (16 dims = 32 bytes) of block s / 4 starts s % 4 x 32 bytes further: add (32 (s % 4)) >> 4
//     to the start field.
//   - MN-major with the transpose bit (V in O = P·V: B(k = key, n = dim), the n = dims of a key
//     contiguous). SBO = 1024 bytes, the step from one 8-key group to the next along k; LBO = the
//     step from one 64-column block to the next along n (R x 128 bytes). k-step s (16 keys) starts
//     16 x 128 = 2048 bytes x s further.
#pragma once

#include <cstdint>

#ifndef __CUDACC__
#define FL_HD
#else
#define FL_HD __host__ __device__
#endif

namespace fl::ptx::gmma {

enum class Layout : uint32_t { kNone = 0, k128B = 1, k64B = 2, k32B = 3 };

// The fields of a descriptor, in bytes (the encoder shifts them).
struct DescFields {
  uint32_t start_addr = 0;  // shared address of the tile, 16-byte aligned
  uint32_t lbo = 0;         // leading dimension byte offset
  uint32_t sbo = 0;         // stride dimension byte offset
  uint32_t base_offset = 0; // 3 bits
  Layout layout = Layout::kNone;
};

FL_HD constexpr uint64_t encode(const DescFields& f) {
  return (static_cast<uint64_t>((f.start_addr >> 4) & 0x3FFFu) << 0) |
         (static_cast<uint64_t>((f.lbo >> 4) & 0x3FFFu) << 16) |
         (static_cast<uint64_t>((f.sbo >> 4) & 0x3FFFu) << 32) |
         (static_cast<uint64_t>(f.base_offset & 0x7u) << 49) |
         (static_cast<uint64_t>(f.layout) << 62);
}

FL_HD constexpr DescFields decode(uint64_t d) {
  DescFields f;
  f.start_addr = static_cast<uint32_t>(d & 0x3FFFu) << 4;
  f.lbo = static_cast<uint32_t>((d >> 16) & 0x3FFFu) << 4;
  f.sbo = static_cast<uint32_t>((d >> 32) & 0x3FFFu) << 4;
  f.base_offset = static_cast<uint32_t>((d >> 49) & 0x7u);
  f.layout = static_cast<Layout>((d >> 62) & 0x3u);
  return f;
}

// Bytes between consecutive 8-row groups of a 128-byte-swizzled tile.
constexpr uint32_t kSw128GroupBytes = 8 * 128;

// A K-major operand (Q or K) stored in the 128-byte swizzle, starting at `smem_addr`.
FL_HD constexpr uint64_t kmajor_sw128(uint32_t smem_addr) {
  return encode({smem_addr, 16, kSw128GroupBytes, 0, Layout::k128B});
}

// An MN-major operand (V, read with the transpose bit) in the 128-byte swizzle: its 64-column
// blocks are `block_bytes` apart.
FL_HD constexpr uint64_t mnmajor_sw128(uint32_t smem_addr, uint32_t block_bytes) {
  return encode({smem_addr, block_bytes, kSw128GroupBytes, 0, Layout::k128B});
}

// The 64-byte swizzle (rung 28's e4m3 tiles at d = 64, whose rows are 64 bytes): 16-byte chunk c
// of row r at chunk c ^ ((r / 2) % 4) of its 64-byte row, the pattern repeating every 8 rows
// (512 bytes; what TMA's CU_TENSOR_MAP_SWIZZLE_64B writes). A K-major operand in it: SBO = 512
// bytes from one 8-row group to the next, LBO unused; k-step s of 32 bytes adds 32 s bytes.
constexpr uint32_t kSw64GroupBytes = 8 * 64;
FL_HD constexpr uint64_t kmajor_sw64(uint32_t smem_addr) {
  return encode({smem_addr, 16, kSw64GroupBytes, 0, Layout::k64B});
}

// Rung 71: 16-bit tiles whose rows are whole 32-column blocks but not whole 64-column ones
// (d = 96: three blocks) in the 64-byte swizzle, as sw128_offset lays out 64-column blocks:
// block c / 32 (rows x 64 bytes apart), row r, chunk ((c % 32) / 8) ^ ((r / 2) % 4), the tile
// 512-byte aligned. K-major (Q, K): kmajor_sw64, k-step s (16 dims) of block s / 2 starts
// 32 (s % 2) bytes into its rows. MN-major (V): mnmajor_sw64, LBO the step from one 32-column
// block to the next (rows x 64 bytes), SBO 512 bytes (8 keys); k-step s starts 16 x 64 = 1024
// bytes x s further.
FL_HD constexpr uint64_t mnmajor_sw64(uint32_t smem_addr, uint32_t block_bytes) {
  return encode({smem_addr, block_bytes, kSw64GroupBytes, 0, Layout::k64B});
}
FL_HD constexpr uint32_t sw64_offset(uint32_t r, uint32_t c, uint32_t rows) {
  return (c / 32) * rows * 64 + r * 64 + ((((c % 32) / 8) ^ ((r / 2) % 4)) * 16) + (c % 8) * 2;
}

// A descriptor advanced by `bytes` (a multiple of 16): only the start field moves. Valid while the
// start field does not overflow its 14 bits (shared addresses < 256 KiB: always on sm_90).
FL_HD constexpr uint64_t advance(uint64_t desc, uint32_t bytes) { return desc + (bytes >> 4); }

// Byte offset of element (r, c) of a 16-bit tile of `rows` rows and 64-column blocks in the
// 128-byte swizzle (the layout above): block c / 64, row r, chunk ((c % 64) / 8) ^ (r % 8).
FL_HD constexpr uint32_t sw128_offset(uint32_t r, uint32_t c, uint32_t rows) {
  return (c / 64) * rows * 128 + r * 128 + ((((c % 64) / 8) ^ (r % 8)) * 16) + (c % 8) * 2;
}

}  // namespace fl::ptx::gmma

#undef FL_HD
