// The candidates of a config search (rung 12's, and rung 16's) as the tuning executable tune_NN
// sees them (host code). Built only with -DFL_AUTOTUNE=ON: common/tune/tune_candidate.cuh defines
// one Candidate per generated .cu, common/tune/tune_main.cpp runs them (scripts/autotune.py drives
// both). The namespace keeps rung 12's name, as config.h explains.
#pragma once

#include <cuda_runtime.h>

#include "common/attention.h"
#include "common/registry.h"
#include "common/tune/config.h"

namespace fl::k12_autotune::tune {

// One line of the tuned rung's kernels/NN_*/tune_candidates.h.
struct CandidateSpec {
  int index;
  int head_dim;
  ConfigValues config;
};

#define FL_TUNE_AS_SPEC(i, d, br, bc, warps, stages, load) \
  ::fl::k12_autotune::tune::CandidateSpec{i, d, {br, bc, warps, stages, load}},

struct Candidate {
  CandidateSpec spec;
  // The candidate as a kernel of the harness for one dtype (supports() also checks d), so that
  // fl::verify and fl::run_kernel take it like any rung.
  const KernelInfo& (*info)(DType);
  // cudaFuncGetAttributes of the instantiation: registers, local memory (spills), ...
  cudaFuncAttributes (*attributes)(DType);
  // Resident blocks per SM (cudaOccupancyMaxActiveBlocksPerMultiprocessor) with its shared memory.
  int (*blocks_per_sm)(DType);
};

}  // namespace fl::k12_autotune::tune

#define FL_TUNE_CAT2(a, b) a##b
#define FL_TUNE_CAT(a, b) FL_TUNE_CAT2(a, b)
