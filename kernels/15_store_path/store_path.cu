// Kernel 15 of 16 — store path: the launcher. The kernel is in store_path.cuh; like rung 12, this
// file compiles the configs of its tuned table (tuned_configs.h in this folder: rung 12's table,
// copied) and runs the one recorded for the device, d and dtype (common/tune/dispatch.h).
// See the banner of store_path.cuh and docs/kernels/15_store_path.md.
#include <string>

#include "common/registry.h"
#include "common/tune/dispatch.h"
#include "kernels/15_store_path/tuned_configs.h"
#include "kernels/15_store_path/store_path.cuh"

namespace fl {
namespace k15_store_path {

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
    return "no config in kernels/15_store_path/tuned_configs.h for this device, d and dtype";
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

}  // namespace k15_store_path

const KernelInfo& kernel_15() {
  static const KernelInfo info{15,
                               "store_path",
                               "store path: O staged in swizzled smem, 128-bit .cs stores",
                               "docs/kernels/15_store_path.md",
                               80,
                               k15_store_path::tile,
                               k15_store_path::supports,
                               k15_store_path::launch};
  return info;
}

}  // namespace fl
