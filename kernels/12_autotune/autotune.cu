// Kernel 12 of 16 — auto-tuning: the launcher. The kernel is in autotune.cuh; this file compiles
// the configs that kernels/12_autotune/tuned_configs.h records (written by scripts/autotune.py)
// and, at every launch, runs the one recorded for the device's architecture, the head dim and the
// dtype (common/tune/dispatch.h). See the banner of autotune.cuh and docs/kernels/12_autotune.md.
#include <string>

#include "common/registry.h"
#include "kernels/12_autotune/autotune.cuh"
#include "common/tune/dispatch.h"
#include "kernels/12_autotune/tuned_configs.h"

namespace fl {
namespace k12_autotune {

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
    return "no config in tuned_configs.h for this device, d and dtype";
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

}  // namespace k12_autotune

const KernelInfo& kernel_12() {
  static const KernelInfo info{12,
                               "autotune",
                               "auto-tuning: block shape per GPU, d and dtype (tuned_configs.h)",
                               "docs/kernels/12_autotune.md",
                               80,
                               k12_autotune::tile,
                               k12_autotune::supports,
                               k12_autotune::launch};
  return info;
}

}  // namespace fl
