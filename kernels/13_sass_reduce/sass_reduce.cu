// Kernel 13 of 16 — instruction reduction guided by SASS: the launcher. The kernel is in
// sass_reduce.cuh; like rung 12, this file compiles the configs of its tuned table
// (tuned_configs.h in this folder: rung 12's table, copied) and runs the one recorded for the
// device, d and dtype (common/tune/dispatch.h).
// See the banner of sass_reduce.cuh and docs/kernels/13_sass_reduce.md.
#include <string>

#include "common/registry.h"
#include "common/tune/dispatch.h"
#include "kernels/13_sass_reduce/tuned_configs.h"
#include "kernels/13_sass_reduce/sass_reduce.cuh"

namespace fl {
namespace k13_sass_reduce {

using k12_autotune::TunedConfig;
using k12_autotune::tuned_index;
using k12_autotune::visit_tuned;

// kTunedConfigs as a type, for visit_tuned.
struct Tuned {
  static constexpr int kSize = static_cast<int>(sizeof(kTunedConfigs) / sizeof(kTunedConfigs[0]));
  static constexpr TunedConfig at(int i) { return kTunedConfigs[i]; }
};

std::string supports(const AttnParams& p) {
  if (p.head_dim != 64 && p.head_dim != 128) {
    return "head_dim must be 64 or 128 (got " + std::to_string(p.head_dim) + ")";
  }
  const int index = tuned_index(kTunedConfigs, p);
  if (index < 0) {
    return "no config in kernels/13_sass_reduce/tuned_configs.h for this device, d and dtype";
  }
  std::string why;
  visit_tuned<Tuned>(index, [&](auto e) {
    using E = decltype(e);
    why = supports_config<E::kHeadDim, typename E::Cfg>(p);
  });
  return why;
}

TileShape tile(const AttnParams& p) {
  const int index = tuned_index(kTunedConfigs, p);
  if (index < 0) return {128, 32};
  return {kTunedConfigs[index].config.br, kTunedConfigs[index].config.bc};
}

void launch(const AttnParams& p, cudaStream_t stream) {
  visit_tuned<Tuned>(tuned_index(kTunedConfigs, p), [&](auto e) {
    using E = decltype(e);
    launch_config<typename E::T, E::kHeadDim, typename E::Cfg>(p, stream);
  });
}

}  // namespace k13_sass_reduce

const KernelInfo& kernel_13() {
  static const KernelInfo info{13,
                               "sass_reduce",
                               "SASS-guided: swizzled addresses precomputed, B fragment order",
                               "docs/kernels/13_sass_reduce.md",
                               80,
                               k13_sass_reduce::tile,
                               k13_sass_reduce::supports,
                               k13_sass_reduce::launch};
  return info;
}

}  // namespace fl
