// Kernel 16 of 16 — final: the launcher. The kernel is in final.cuh; this file compiles the
// configs of rung 16's own tuned table (kernels/16_final/tuned_configs.h, written by
// scripts/autotune.py --rungs 16) and runs the one recorded for the device, d and dtype, in the
// specialisation its strides allow (final.cuh: launch_config).
// See the banner of final.cuh and docs/kernels/16_final.md.
#include <string>

#include "common/registry.h"
#include "common/tune/dispatch.h"
#include "kernels/16_final/final.cuh"
#include "kernels/16_final/tuned_configs.h"

namespace fl {
namespace k16_final {

using k12_autotune::TunedConfig;
using k12_autotune::tuned_index;
using k12_autotune::visit_tuned;

// kTunedConfigs as a type, for visit_tuned.
struct Tuned {
  static constexpr int kSize = static_cast<int>(sizeof(kTunedConfigs) / sizeof(kTunedConfigs[0]));
  static constexpr TunedConfig at(int i) { return kTunedConfigs[i]; }
};

std::string supports(const AttnParams& p) {
  if (p.head_dim != 64 && p.head_dim != 128 && p.head_dim != 256) {
    return "head_dim must be 64, 128 or 256 (got " + std::to_string(p.head_dim) + ")";
  }
  const int index = tuned_index(kTunedConfigs, p);
  if (index < 0) {
    return "no config in kernels/16_final/tuned_configs.h for this device, d and dtype";
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

}  // namespace k16_final

const KernelInfo& kernel_16() {
  static const KernelInfo info{16,
                               "final",
                               "final: fewer rescales, one barrier per tile, constant strides, L2 order, full contract",
                               "docs/kernels/16_final.md",
                               80,
                               k16_final::tile,
                               k16_final::supports,
                               k16_final::launch};
  return info;
}

}  // namespace fl
