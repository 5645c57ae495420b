// Kernel 14 of 16 — loop hygiene: the launcher. The kernel is in loop_hygiene.cuh; like rung 12,
// this file compiles the configs of its tuned table (tuned_configs.h in this folder: rung 12's
// table, copied) and runs the one recorded for the device, d and dtype (common/tune/dispatch.h).
// See the banner of loop_hygiene.cuh and docs/kernels/14_loop_hygiene.md.
#include <string>

#include "common/registry.h"
#include "common/tune/dispatch.h"
#include "kernels/14_loop_hygiene/tuned_configs.h"
#include "kernels/14_loop_hygiene/loop_hygiene.cuh"

namespace fl {
namespace k14_loop_hygiene {

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
    return "no config in kernels/14_loop_hygiene/tuned_configs.h for this device, d and dtype";
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

}  // namespace k14_loop_hygiene

const KernelInfo& kernel_14() {
  static const KernelInfo info{14,
                               "loop_hygiene",
                               "loop hygiene: reverse KV order, pointer bumps, first tile peeled",
                               "docs/kernels/14_loop_hygiene.md",
                               80,
                               k14_loop_hygiene::tile,
                               k14_loop_hygiene::supports,
                               k14_loop_hygiene::launch};
  return info;
}

}  // namespace fl
