// One candidate of a config search, compiled on its own: CMakeLists.txt (FL_AUTOTUNE=ON) generates
// build/generated/tune_NN/candidate_<i>.cu, which defines FL_TUNE_INDEX = i, includes the rung's
// tune_target.cuh (its kernel header; FL_TUNE_NS, its namespace) and then this file. It
// instantiates that kernel with line i of the rung's tune_candidates.h (FL_TUNE_CANDIDATES_H), for
// fp16 and bf16, and defines `const Candidate& candidate_<i>()` for tune_main.cpp. Harness code
// (common/tune/): it includes no rung's file itself; the generated .cu brings the rung's own.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>

#include "common/cuda_check.h"
#include "common/tune/config.h"
#include "common/tune/tune.h"
#include FL_TUNE_CANDIDATES_H

#if !defined(FL_TUNE_INDEX) || !defined(FL_TUNE_NS) || !defined(FL_TUNE_RUNG)
#error "FL_TUNE_INDEX, FL_TUNE_NS and FL_TUNE_RUNG come from the generated candidate_<i>.cu"
#endif

namespace fl::k12_autotune::tune {
namespace {

namespace kern = FL_TUNE_NS;  // the tuned rung's kernel, supports_config, launch_config

constexpr CandidateSpec kSpecs[] = {FL_TUNE_CANDIDATES(FL_TUNE_AS_SPEC)};
constexpr CandidateSpec kSpec = kSpecs[FL_TUNE_INDEX];
static_assert(kSpec.index == FL_TUNE_INDEX, "tune_candidates.h lists the candidates in order");
constexpr int kD = kSpec.head_dim;
using Cfg = Config<kSpec.config.br, kSpec.config.bc, kSpec.config.warps, kSpec.config.stages,
                   kSpec.config.load>;

template <typename T>
const KernelInfo& info_typed() {
  static const std::string title =
      "candidate " + std::to_string(FL_TUNE_INDEX) + ": d=" + std::to_string(kD) +
      " Br=" + std::to_string(Cfg::kBr) + " Bc=" + std::to_string(Cfg::kBc) +
      " warps=" + std::to_string(Cfg::kWarps) + " stages=" + std::to_string(Cfg::kStages) +
      (Cfg::kQResident ? " Q resident" : " Q per tile");
  static const KernelInfo info{FL_TUNE_RUNG,
                               "candidate",
                               title.c_str(),
                               "docs/kernels/12_autotune.md",
                               80,
                               kern::tile_config<Cfg>,
                               kern::supports_config<kD, Cfg>,
                               kern::launch_config<T, kD, Cfg>};
  return info;
}

const KernelInfo& info(DType t) {
  return t == DType::f16 ? info_typed<__half>() : info_typed<__nv_bfloat16>();
}

cudaFuncAttributes attributes(DType t) {
  cudaFuncAttributes a{};
  if (t == DType::f16) {
    FL_CUDA_CHECK(cudaFuncGetAttributes(&a, kern::attention_kernel<__half, kD, Cfg>));
  } else {
    FL_CUDA_CHECK(cudaFuncGetAttributes(&a, kern::attention_kernel<__nv_bfloat16, kD, Cfg>));
  }
  return a;
}

template <typename T>
int blocks_per_sm_typed() {
  constexpr int kSmem = smem_bytes(Cfg::values(), kD);
  FL_CUDA_CHECK(cudaFuncSetAttribute(kern::attention_kernel<T, kD, Cfg>,
                                     cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  int blocks = 0;
  FL_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      &blocks, kern::attention_kernel<T, kD, Cfg>, Cfg::kThreads, kSmem));
  return blocks;
}

int blocks_per_sm(DType t) {
  return t == DType::f16 ? blocks_per_sm_typed<__half>() : blocks_per_sm_typed<__nv_bfloat16>();
}

}  // namespace

const Candidate& FL_TUNE_CAT(candidate_, FL_TUNE_INDEX)() {
  static const Candidate c{kSpec, info, attributes, blocks_per_sm};
  return c;
}

}  // namespace fl::k12_autotune::tune
