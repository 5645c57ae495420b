#include "common/tensor_map.h"

#include <cuda_runtime.h>

#include <cstdint>

#include "common/cuda_check.h"

namespace fl {

namespace {

// cuTensorMapEncodeTiled's signature as of CUDA 12.0 (the version asked for below).
using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                 const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                                 const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                 CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

EncodeTiled encoder() {
  static EncodeTiled fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found{};
    FL_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000,
                                                   cudaEnableDefault, &found));
    if (found != cudaDriverEntryPointSuccess || p == nullptr) {
      throw CudaError("cuTensorMapEncodeTiled: the driver does not provide it (TMA needs a "
                      "CUDA 12 driver)");
    }
    return reinterpret_cast<EncodeTiled>(p);
  }();
  return fn;
}

}  // namespace

std::string tma_rules(const char* tensor, const Strides& s, int64_t rows, int elem_bytes) {
  const int64_t kElem = elem_bytes, kMaxStride = int64_t{1} << 40;
  const std::string t = tensor;
  if (s.row * kElem >= kMaxStride || s.head * kElem >= kMaxStride ||
      s.batch * kElem >= kMaxStride) {
    return t + "'s strides must be below 2^40 bytes (a TMA rule)";
  }
  // The kernels give TMA its box coordinates as 32-bit signed integers (the PTX operands are
  // .s32), which also keeps the dimension below TMA's own limit of 2^32.
  if (rows > INT32_MAX) return t + "'s length must be below 2^31 (TMA coordinates are 32-bit)";
  return "";
}

CUtensorMap make_tensor_map_4d(const void* base, int64_t head_dim, int64_t rows, int64_t heads,
                               int64_t batch, const Strides& s, int box_rows) {
  return make_tensor_map_4d(base, 2, head_dim, rows, heads, batch, s, 64, box_rows, 128);
}

CUtensorMap make_tensor_map_4d(const void* base, int elem_bytes, int64_t cols, int64_t rows,
                               int64_t heads, int64_t batch, const Strides& s, int box_cols,
                               int box_rows, int swizzle_bytes, int l2_promotion_bytes) {
  if (l2_promotion_bytes != 0 && l2_promotion_bytes != 64 && l2_promotion_bytes != 128 &&
      l2_promotion_bytes != 256) {
    throw CudaError("make_tensor_map_4d: the L2 promotion must be 0, 64, 128 or 256 bytes (got " +
                    std::to_string(l2_promotion_bytes) + ")");
  }
  if ((elem_bytes != 1 && elem_bytes != 2) || (swizzle_bytes != 64 && swizzle_bytes != 128) ||
      box_cols * elem_bytes != swizzle_bytes) {
    throw CudaError("make_tensor_map_4d: the box's inner extent (" + std::to_string(box_cols) +
                    " x " + std::to_string(elem_bytes) + " bytes) must equal the swizzle (" +
                    std::to_string(swizzle_bytes) + " bytes)");
  }
  const int64_t kElem = elem_bytes;
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows),
                              static_cast<cuuint64_t>(heads), static_cast<cuuint64_t>(batch)};
  // Strides of dims 1..3 in bytes (dim 0 is contiguous: its stride is the element size).
  const cuuint64_t strides[3] = {static_cast<cuuint64_t>(s.row * kElem),
                                 static_cast<cuuint64_t>(s.head * kElem),
                                 static_cast<cuuint64_t>(s.batch * kElem)};
  const cuuint32_t box[4] = {static_cast<cuuint32_t>(box_cols), static_cast<cuuint32_t>(box_rows),
                             1, 1};
  const cuuint32_t element_strides[4] = {1, 1, 1, 1};
  CUtensorMap map{};
  // The data type only sets the element size here (the copy moves bits): 16-bit for fp16 and
  // bf16 alike, 8-bit for e4m3.
  const CUtensorMapDataType type =
      elem_bytes == 2 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_UINT8;
  const CUtensorMapSwizzle swizzle =
      swizzle_bytes == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B;
  const CUtensorMapL2promotion promotion =
      l2_promotion_bytes == 0    ? CU_TENSOR_MAP_L2_PROMOTION_NONE
      : l2_promotion_bytes == 64  ? CU_TENSOR_MAP_L2_PROMOTION_L2_64B
      : l2_promotion_bytes == 128 ? CU_TENSOR_MAP_L2_PROMOTION_L2_128B
                                  : CU_TENSOR_MAP_L2_PROMOTION_L2_256B;
  const CUresult r = encoder()(&map, type, 4, const_cast<void*>(base), dims, strides, box,
                               element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                               promotion,
                               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    throw CudaError("cuTensorMapEncodeTiled refused the map (CUresult " +
                    std::to_string(static_cast<int>(r)) + ")");
  }
  return map;
}

}  // namespace fl
