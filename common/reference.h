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

// The (batch, query head) pairs the GPU references take a chunk: as many as keep the chunk's fp32
// buffers under `budget_bytes` (at least one pair, at most `pairs`). The forward's buffers a pair:
// S (Nq x Nk) and Q, K, V gathered (Nq x d, 2 Nk x d); the backward's: P and dP (2 Nq x Nk), Q,
// O, dO (3 Nq x d), K, V and dK, dV partials (4 Nk x d) and D (Nq). At decode shapes the K and V
// copies, not S, are what is large (Nq = 1, Nk = 32768: 32 MiB of K and V a pair at d = 128,
// 128 KiB of S).
int64_t reference_chunk_pairs(int64_t pairs, int64_t nq, int64_t nk, int64_t d, bool backward,
                              int64_t budget_bytes = int64_t{1} << 30);

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

// The backward's reference: dQ, dK, dV for b (fp16 or bf16 inputs; b.fwd.lse and b.dout
// required), fp32 on the GPU through cuBLAS, head by head in chunks as reference_attention (the
// score-sized blocks, P and dP, stay under about 1 GiB together). Reads Q, K, V, O (b.fwd's
// pointers and strides), dO (b.dout, b.do_stride) in the inputs' dtype and the LSE as given;
// with S = scale Q K^T, P = exp(S - LSE) (0 where the causal mask hides the key, and in a row
// whose LSE is -inf: a row that sees no key contributes nothing), D = rowsum(dO * O):
//   dV = P^T dO, dP = dO V^T, dS = P * (dP - D), dQ = scale dS K, dK = scale dS^T Q,
// dK and dV summed over the H_q / H_kv query heads of each KV head. Writes contiguous fp32
// dq [B, H_q, Nq, d], dk and dv [B, H_kv, Nk, d]. Precisions:
//   kFp32  everything fp32: the "truth" the gradients' pass rule measures errors against;
//   kLowp  what a kernel rounds: P to the inputs' dtype before dV = P^T dO, dS before
//          dQ = dS K and dK = dS^T Q (dS itself from the unrounded P), and the three outputs
//          (kLowpScores is taken as kLowp: no backward rung stores S).
// Throws std::invalid_argument for e4m3 inputs, a missing LSE or dO, or a shape check_shape
// refuses.
void reference_backward(const BwdParams& b, RefPrecision precision, float* dq, float* dk,
                        float* dv, cublasHandle_t handle, cudaStream_t stream = nullptr);

// The same in float64 on host copies (element values as floats, in b's strides: q, k, v with
// b.fwd's, o with b.fwd.o_stride, dout with b.do_stride; lse contiguous [B, H_q, Nq]), for
// testing the cuBLAS one. Returns contiguous dq [B, H_q, Nq, d], dk and dv [B, H_kv, Nk, d].
void cpu_reference_backward(const BwdParams& b, const std::vector<float>& q,
                            const std::vector<float>& k, const std::vector<float>& v,
                            const std::vector<float>& o, const std::vector<float>& dout,
                            const std::vector<float>& lse, std::vector<double>& dq,
                            std::vector<double>& dk, std::vector<double>& dv);

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
