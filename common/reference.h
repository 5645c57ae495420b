// Reference attention: fp32 through cuBLAS on the GPU (GEMM, row softmax, GEMM), and float64 on
// the CPU for small shapes (used to test the cuBLAS one).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <vector>

#include "common/attention.h"

namespace fl {

// e4m3 inputs (the FP8 rung): every precision reads each input as its e4m3 value times its
// group's descale factor (p.q_descale, ...; per tensor or per head), i.e. computes on the
// dequantised inputs in fp32, and:
//   kLowp       quantises P as the FP8 rung does: to e4m3 after scaling by 448 relative to the
//               row max, p = e4m3(448 exp(s - m)) / 448 / l, with l the sum of the unrounded
//               exp(s - m); O rounded to out_dtype;
//   kLowpScores the same as kLowp (no fp8 kernel stores S).
enum class RefPrecision {
  kFp32,  // everything in fp32: the "truth" the pass rule measures errors against
  kLowp,  // P rounded to the input dtype before P.V and O rounded to out_dtype, as the kernels do
  kLowpScores,  // kLowp, and the scaled scores S rounded to the input dtype before the
                // softmax, as an unfused implementation that stores S in that dtype does
};

// Writes O as fp32 in contiguous [B, H_q, Nq, d] layout to `o_ref`, and, if `lse_ref` is not
// null, the natural-log LSE [B, H_q, Nq] (-inf for a row that sees no key). Reads p.q, p.k, p.v
// with p's strides (and, for e4m3 inputs, the host descale factors, copied to the device here).
// Works head by head in chunks, so memory stays bounded at large N.
void reference_attention(const AttnParams& p, RefPrecision precision, float* o_ref,
                         float* lse_ref, cublasHandle_t handle, cudaStream_t stream = nullptr);

// float64 reference on host copies of Q, K, V (the element type of p.dtype, stored as float
// values here, in p's strides; for e4m3 inputs the dequantised values, e4m3 x descale). Returns
// O [B, H_q, Nq, d] and LSE [B, H_q, Nq].
void cpu_reference(const AttnParams& p, const std::vector<float>& q, const std::vector<float>& k,
                   const std::vector<float>& v, std::vector<double>& o, std::vector<double>& lse);

// RAII cuBLAS handle.
class CublasHandle {
 public:
  CublasHandle();
  ~CublasHandle();
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

}  // namespace fl
