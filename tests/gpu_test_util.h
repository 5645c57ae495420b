// Shared by the GPU tests: skip cleanly (with the reason) where there is no GPU; a problem in the
// input type a kernel takes.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "common/cuda_check.h"
#include "common/harness.h"
#include "common/registry.h"

#define FL_REQUIRE_GPU()                                   \
  do {                                                     \
    std::string fl_why_no_gpu;                             \
    if (!::fl::gpu_available(&fl_why_no_gpu)) {            \
      GTEST_SKIP() << "needs a GPU: " << fl_why_no_gpu;    \
    }                                                      \
  } while (0)

namespace fl::test {

// The input type of kernel k: the tests' 16-bit cases become e4m3 cases for a kernel with
// fp8_inputs (rung 24). A 16-bit spec (fp16 or bf16) is returned as it is for a 16-bit kernel;
// for an fp8 kernel its inputs become e4m3 (the same seeded values, quantised) and its dtype O's
// type, with descale factors per head when `per_head`.
inline ProblemSpec in_input_type(const KernelInfo& k, ProblemSpec s, bool per_head = false) {
  if (!k.fp8_inputs || s.dtype == DType::e4m3) return s;
  s.out_dtype = s.dtype;
  s.dtype = DType::e4m3;
  s.descale_per_head = per_head;
  return s;
}

}  // namespace fl::test
