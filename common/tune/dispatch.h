// From a tuned table (a rung's tuned_configs.h) to a kernel launch: the launcher machinery that
// rung 12 introduced and rungs 13-16 use unchanged. The table is a compile-time list of configs
// (config.h: TunedConfig); the device, the head
// dim and the dtype are run-time values: tuned_index() finds the row, visit_tuned() calls a
// generic lambda with that row as types (dtype T, d, Config), so that every row of the table is
// compiled in, and nothing else.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <type_traits>
#include <utility>

#include "common/attention.h"
#include "common/tune/config.h"

namespace fl::k12_autotune {

// A tuned table as a type (each rung's launcher defines one over its kTunedConfigs):
//   struct Table { static constexpr int kSize = N; static constexpr TunedConfig at(int i); };
// Row I of the table, as types.
template <typename Table, int I>
struct TunedEntry {
  static constexpr TunedConfig kEntry = Table::at(I);
  using T = std::conditional_t<kEntry.dtype == DType::f16, __half, __nv_bfloat16>;
  using Cfg = Config<kEntry.config.br, kEntry.config.bc, kEntry.config.warps,
                     kEntry.config.stages, kEntry.config.load>;
  static constexpr int kHeadDim = kEntry.head_dim;
  // (Each rung's kernel asserts the head dims it is written for: 64 and 128, 256 in rung 16.)
  static_assert(kHeadDim == 64 || kHeadDim == 128 || kHeadDim == 256,
                "tuned_configs.h: d must be 64, 128 or 256");
};

// Calls f(TunedEntry<Table, I>{}) for the row I == index (one comparison per row; nothing
// when index is -1).
template <typename Table, typename F, int... I>
void visit_tuned(int index, F&& f, std::integer_sequence<int, I...>) {
  ((I == index ? f(TunedEntry<Table, I>{}) : void()), ...);
}
template <typename Table, typename F>
void visit_tuned(int index, F&& f) {
  visit_tuned<Table>(index, std::forward<F>(f), std::make_integer_sequence<int, Table::kSize>{});
}

// Compute capability (major * 10 + minor) of the current device, 0 when there is none.
inline int device_cc() {
  int device = 0, major = 0, minor = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
    cudaGetLastError();  // leave no error behind
    return 0;
  }
  return major * 10 + minor;
}

// The row of `table` for p on this device, -1 when there is none. Without a device (the CPU
// tests, --list) the sm_90 rows describe the kernel.
template <int kSize>
int tuned_index(const TunedConfig (&table)[kSize], const AttnParams& p) {
  const int cc = device_cc();
  return find_tuned(table, cc == 0 ? 90 : cc, static_cast<int>(p.head_dim), p.dtype);
}

}  // namespace fl::k12_autotune
