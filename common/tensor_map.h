// Tensor maps for TMA (Hopper's bulk tensor copies): the host side. Device side:
// common/ptx/tma.cuh.
//
// A CUtensorMap (128 bytes, opaque) describes one global tensor to the copy engine: its base
// address, sizes, strides, the box one copy moves, the swizzle the box lands in, and what fills
// the box outside the tensor. It is built on the host by the driver's cuTensorMapEncodeTiled,
// reached through the runtime (cudaGetDriverEntryPointByVersion) so that nothing links against
// libcuda, and is passed to the kernel by value as a `const __grid_constant__ CUtensorMap`.
//
// The ladder's maps are 4-D over an attention tensor [B][H][N][d] (any strides: BHND or BNHD):
//   dims (innermost first)   d, N, H, B
//   strides (bytes)          row, head, batch (the innermost stride is the element size)
//   box                      64 columns x box_rows rows x 1 head x 1 batch: one 128-byte-swizzled
//                            block of the tile (common/ptx/gmma_desc.cuh); a d = 128 tile is two
//                            copies, columns 0-63 and 64-127 (an inner box of 128 16-bit
//                            elements, 256 bytes, is more than the 128-byte swizzle allows)
//   out of bounds            zero fill: rows past N arrive as zeros, never another head's rows
#pragma once

#include <cuda.h>  // CUtensorMap and its enums (types only: libcuda is not linked)

#include <cstdint>
#include <string>

#include "common/attention.h"

namespace fl {

// The rules TMA puts on one tensor of the problem beyond check_common, which already asks for a
// 16-byte aligned base and strides that are multiples of 16 bytes (TMA's own rules too): every
// stride below 2^40 bytes, and the length N below 2^31, since the kernels pass box coordinates
// as 32-bit signed integers. "" when they hold, else the broken rule naming the tensor ("K's
// strides ...").
// `elem_bytes`: the tensor's element size (2 for fp16/bf16, 1 for e4m3).
std::string tma_rules(const char* tensor, const Strides& s, int64_t rows, int elem_bytes = 2);

// Builds the 4-D map described above for a tensor of B x H x N x d 16-bit elements at `base`.
// Throws CudaError when the driver entry point is missing or the encoder refuses the map (which
// tma_rules should have prevented).
CUtensorMap make_tensor_map_4d(const void* base, int64_t head_dim, int64_t rows, int64_t heads,
                               int64_t batch, const Strides& s, int box_rows);

// The general form, for any element size: a tensor of B x H x rows x cols elements of
// `elem_bytes` bytes (strides in elements), a box of box_cols x box_rows elements landing in the
// 128-byte or 64-byte swizzle (`swizzle_bytes`; the box's inner extent, box_cols x elem_bytes,
// must equal it). The map above is this one with 16-bit elements, 64-column boxes and the
// 128-byte swizzle; rung 28 reads 8-bit e4m3 tiles through it (128 one-byte columns a row, or
// 64 with the 64-byte swizzle at d = 64).
// `l2_promotion_bytes`: how much the L2 fetches from memory for each piece a box asks (0: the
// piece alone; 64, 128 or 256: the aligned span around it). 256 unless a kernel says otherwise.
CUtensorMap make_tensor_map_4d(const void* base, int elem_bytes, int64_t cols, int64_t rows,
                               int64_t heads, int64_t batch, const Strides& s, int box_cols,
                               int box_rows, int swizzle_bytes, int l2_promotion_bytes = 256);

}  // namespace fl
