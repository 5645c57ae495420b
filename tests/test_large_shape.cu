// Tensors of more than 2^31 elements (GPU; skipped without one, or without the memory): every
// kernel must index them with 64-bit offsets. The project's rule (docs/contract.md): a shape
// that a kernel claims works whatever its element count; no kernel refuses a shape for its size
// alone.
//
// The shape: dense BHND, B = 64, H = 1025, N = 256, d = 128: 2,149,580,800 elements per tensor,
// just past 2^31 = 2,147,483,648, so that the last ~2 million elements of Q, K, V, O (the last
// heads of the last batch) sit at offsets a 32-bit index would wrap. Every launcher's grid holds
// it (H_q and B <= 65535 for the rungs that put them in grid.y and grid.z; N a multiple of every
// Br and Bc). One dtype (fp16) and the LSE; the reference is computed once for all kernels.
//
// Device memory: Q, K, V, O and O's second copy (5 x 4.3 GB), the fp32 reference output and its
// low-precision twin (2 x 8.6 GB), the reference's per-chunk buffers (2.5 GB) and kernel 00's
// score workspace (1 GiB): about 42 GB, checked with cudaMemGetInfo first.
//
// A kernel with fp8_inputs runs the same shape with e4m3 inputs (O fp16), after the 16-bit
// kernels and their problem are done with: inputs of one byte (3 x 2.1 GB), O and its copy
// (2 x 4.3 GB), the fp32 values a tensor is quantised from (8.6 GB, one at a time, freed), the
// references as above and the kernel's own workspace (V^T, 2.1 GB for rung 28): less than the
// fp16 problem's.
#include <gtest/gtest.h>

#include <climits>
#include <cstdint>
#include <string>
#include <vector>

#include "common/harness.h"
#include "common/registry.h"
#include "gpu_test_util.h"

namespace {

TEST(LargeShape, EveryKernelIndexesPast2To31Elements) {
  FL_REQUIRE_GPU();
  fl::ProblemSpec s;
  s.dtype = fl::DType::f16;
  s.batch = 64;
  s.heads_q = s.heads_kv = 1025;
  s.seqlen_q = s.seqlen_k = 256;
  s.head_dim = 128;
  s.with_lse = true;

  // The shape really passes 2^31 elements, in every tensor.
  const fl::AttnParams shape = s.params();
  for (const fl::Strides* st : {&shape.q_stride, &shape.k_stride, &shape.v_stride,
                                &shape.o_stride}) {
    ASSERT_GT(fl::span_elements(*st, s.batch, s.heads_q, s.seqlen_q, s.head_dim), INT32_MAX);
  }

  const double elements = static_cast<double>(s.batch * s.heads_q * s.seqlen_q * s.head_dim);
  const double gib = 1024.0 * 1024.0 * 1024.0;
  const double needed = 5 * elements * 2 + 2 * elements * 4 + 3.5 * gib + 1.0 * gib;  // + margin
  size_t free_bytes = 0, total_bytes = 0;
  FL_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  if (static_cast<double>(free_bytes) < needed) {
    GTEST_SKIP() << "needs " << needed / gib << " GiB of free device memory, the GPU has "
                 << static_cast<double>(free_bytes) / gib << " GiB free (of "
                 << static_cast<double>(total_bytes) / gib << ")";
  }

  fl::CublasHandle cublas;
  // The 16-bit kernels on the fp16 problem, then (that problem freed) the kernels with
  // fp8_inputs on the e4m3 one.
  for (bool fp8 : {false, true}) {
    std::vector<const fl::KernelInfo*> kernels;
    for (const fl::KernelInfo* k : fl::forward_kernels()) {
      // A serving rung refuses N = 256 queries (a prefill): its own cache of more than 2^31
      // elements is tests/test_decode.cu's (DecodeLargeShape).
      if (k->fp8_inputs == fp8 && k->number < FL_SERVING_FIRST_RUNG) kernels.push_back(k);
    }
    if (kernels.empty()) continue;
    fl::ProblemSpec spec = s;
    if (fp8) {
      spec.dtype = fl::DType::e4m3;
      spec.out_dtype = fl::DType::f16;
    }
    fl::Problem problem(spec);
    const fl::Reference ref(problem, cublas);
    for (const fl::KernelInfo* k : kernels) {
      // No kernel may refuse a dense shape at d = 128, N = 256 in its input type for its
      // element count.
      const std::string why = fl::why_unsupported(*k, problem.params_for(*k));
      EXPECT_EQ(why, "") << k->name() << " refuses the shape";
      if (!why.empty()) continue;
      const fl::Verdict v = fl::verify(*k, problem, ref);
      EXPECT_TRUE(v.passed) << k->name() << " on " << spec.describe() << ": " << v.why
                            << " [max err " << v.out.max_abs_err << ", tolerance " << v.tolerance
                            << "]";
    }
  }
}

}  // namespace
