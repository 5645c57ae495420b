// The two input types of the ladder and their conversions, for device code.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "common/attention.h"

namespace fl {

template <typename T>
struct TypeTraits;

template <>
struct TypeTraits<__half> {
  using pair = __half2;
  static constexpr DType kDType = DType::f16;
  __device__ static float to_float(__half x) { return __half2float(x); }
  __device__ static __half from_float(float x) { return __float2half_rn(x); }
  __device__ static float2 to_float2(__half2 x) { return __half22float2(x); }
  __device__ static __half2 from_float2(float a, float b) { return __floats2half2_rn(a, b); }
};

template <>
struct TypeTraits<__nv_bfloat16> {
  using pair = __nv_bfloat162;
  static constexpr DType kDType = DType::bf16;
  __device__ static float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
  __device__ static __nv_bfloat16 from_float(float x) { return __float2bfloat16_rn(x); }
  __device__ static float2 to_float2(__nv_bfloat162 x) { return __bfloat1622float2(x); }
  __device__ static __nv_bfloat162 from_float2(float a, float b) {
    return __floats2bfloat162_rn(a, b);
  }
};

// Two floats rounded to T and packed into one 32-bit register (first in the low half), the
// operand format of mma.sync.
template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  auto v = TypeTraits<T>::from_float2(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

// Calls f(T{}) with T = __half or __nv_bfloat16 as `dtype` says: the launchers' dtype switch.
template <typename F>
void dispatch_dtype(DType dtype, F&& f) {
  if (dtype == DType::f16) {
    f(__half{});
  } else {
    f(__nv_bfloat16{});
  }
}

}  // namespace fl
