// The block shape a tunable kernel is compiled for (rung 12 introduced it; rungs 12-16 use it):
// what scripts/autotune.py searches, what each rung's tuned_configs.h (kernels/NN_*/) records,
// host and device code alike. Harness code: a rung includes it from here, not from another
// rung's folder.
//
//   Br      query rows per block         = warps x 16 x (M-tiles per warp)
//   Bc      keys per KV tile (a multiple of 16: P·V walks the keys 16 at a time)
//   warps   warps per block; warp w owns rows [w Br/warps, (w + 1) Br/warps) of the Q tile
//   stages  depth of the shared-memory ring of K and V tiles (2 = rung 08's double buffering)
//   load    where the Q fragments of S = Q·Kᵀ come from in the KV loop:
//             kLoadQPerTile  read from shared memory (ldmatrix) for every KV tile, one k-slice at
//                            a time, double buffered (rung 10 at d = 128): few registers
//             kLoadQResident read once before the loop and kept in registers (rung 10 at d = 64):
//                            d/2 registers a lane per M-tile, no Q ldmatrix in the loop
#pragma once

#include "common/attention.h"

// The namespace keeps the name of rung 12, where this vocabulary was introduced: Config<...> is a
// template argument of every attention_kernel of rungs 12-16, so its namespace is part of their
// symbol names (fl::k12_autotune::Config<128, 64, 4, 2, 1>), which the pages' resource tables,
// the ncu / SASS filters and the recorded results name. Moving the file changed none of them.
namespace fl::k12_autotune {

enum LoadPattern : int { kLoadQPerTile = 0, kLoadQResident = 1 };

// The numbers of a config, as values (the tuned table, the tuner's candidate list).
struct ConfigValues {
  int br, bc, warps, stages, load;
};

// Dynamic shared memory of a block: the Q tile plus `stages` K tiles and `stages` V tiles, each
// row d 16-bit elements.
constexpr int smem_bytes(const ConfigValues& c, int head_dim) {
  return (c.br + 2 * c.stages * c.bc) * head_dim * 2;
}

// The rules every config obeys (the static_asserts of Config below, as a function for the
// tuner's candidate list): "" when valid, else the rule broken.
constexpr const char* config_error(const ConfigValues& c, int head_dim) {
  if (c.warps != 4 && c.warps != 8) return "warps must be 4 or 8";
  if (c.br % (16 * c.warps) != 0) return "Br must be a multiple of 16 x warps (whole M-tiles)";
  if (c.br / (16 * c.warps) > 2) return "at most 2 M-tiles per warp (registers)";
  if (c.bc % 16 != 0 || c.bc < 32 || c.bc > 128) return "Bc must be 32, 48, ..., 128";
  if (c.stages < 2 || c.stages > 3) return "stages must be 2 or 3";
  if (c.load != kLoadQPerTile && c.load != kLoadQResident) return "unknown load pattern";
  if ((c.bc * head_dim / 8) % (32 * c.warps) != 0 || (c.br * head_dim / 8) % (32 * c.warps) != 0) {
    return "the block's 16-byte copies must cover a K/V (and Q) tile evenly";
  }
  if (smem_bytes(c, head_dim) > 227 * 1024) return "more than 227 KiB of shared memory";
  return "";
}

// A config as types, for the kernel templates.
template <int Br, int Bc, int Warps, int Stages, int Load>
struct Config {
  static constexpr int kBr = Br;          // query rows per block
  static constexpr int kBc = Bc;          // keys per KV tile
  static constexpr int kWarps = Warps;    // warps per block
  static constexpr int kStages = Stages;  // K/V tiles in the shared ring
  static constexpr int kLoad = Load;      // LoadPattern
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kRowsPerWarp = kBr / kWarps;
  static constexpr int kMTiles = kRowsPerWarp / 16;  // M-tiles (16 rows, one mma's M) per warp
  static constexpr bool kQResident = Load == kLoadQResident;
  // Register budget: 4 warps run 2 blocks per SM (65536 / 256 threads = 256 registers, 255
  // usable); 8 warps one block (the same 255: the register file is 64K 32-bit registers).
  static constexpr int kMinBlocksPerSm = kWarps == 4 ? 2 : 1;
  static constexpr ConfigValues values() { return {Br, Bc, Warps, Stages, Load}; }
  static_assert(kWarps == 4 || kWarps == 8, "4 or 8 warps");
  static_assert(kRowsPerWarp == 16 * kMTiles && kMTiles >= 1 && kMTiles <= 2,
                "split-Q: each warp owns 1 or 2 whole M-tiles");
  static_assert(kBc % 16 == 0 && kBc >= 32 && kBc <= 128, "P·V walks the keys 16 at a time");
  static_assert(kStages == 2 || kStages == 3, "a ring of 2 or 3 stages");
};

// One row of the tuned table: the config that runs (arch, d, dtype). `sm` is 80 (every sm_8x
// device) or 90 (sm_90 and later); `tuned` is false while the entry is the hand-chosen default.
struct TunedConfig {
  int sm;
  int head_dim;
  DType dtype;
  ConfigValues config;
  bool tuned;
};

// The row of `table` for a device of compute capability `cc` (major * 10 + minor), or -1.
template <int N>
constexpr int find_tuned(const TunedConfig (&table)[N], int cc, int head_dim, DType dtype) {
  const int sm = cc >= 90 ? 90 : 80;
  for (int i = 0; i < N; ++i) {
    if (table[i].sm == sm && table[i].head_dim == head_dim && table[i].dtype == dtype) return i;
  }
  return -1;
}

}  // namespace fl::k12_autotune
