// The block shape rung 15 runs per GPU architecture, head dim and dtype: rung 12's tuned table
// (kernels/12_autotune/tuned_configs.h, written by scripts/autotune.py --rungs 12), copied here
// as it stood at commit b5d03b7, so that the rung is complete in its own folder. Rung 15
// is not tuned on its own: it runs rung 12's winners, so that its gain over rung 12 is measured at
// the same block shapes. The copy is this lesson's frozen state: tuning rung 12 again rewrites
// rung 12's table, not this one (copy it here by hand, and measure again, to follow it).
// The notes of the entries are rung 12's measurements.
//   sm_90: tuned for rung 12 on NVIDIA H100 80GB HBM3 (cc 9.0) on 2026-11-22T04:42:07+00:00,
//     B = H = 16, N = [1024, 4096]
//   sm_80: not yet tuned (the hand-chosen default)
// sm = 90 serves compute capability 9.0 and later, sm = 80 every 8.x device. `tuned` is
// false where the entry is still the hand-chosen default.
#pragma once

#include "common/tune/config.h"

namespace fl::k15_store_path {

using k12_autotune::kLoadQPerTile;
using k12_autotune::kLoadQResident;
using k12_autotune::TunedConfig;

constexpr TunedConfig kTunedConfigs[] = {
    // sm, d, dtype, {Br, Bc, warps, stages, load}, tuned
    // not yet tuned: the rung-11 shape
    {80, 64, DType::f16, {128, 32, 4, 2, kLoadQResident}, false},
    // not yet tuned: the rung-11 shape
    {80, 64, DType::bf16, {128, 32, 4, 2, kLoadQResident}, false},
    // not yet tuned: the rung-11 shape
    {80, 128, DType::f16, {128, 32, 4, 2, kLoadQPerTile}, false},
    // not yet tuned: the rung-11 shape
    {80, 128, DType::bf16, {128, 32, 4, 2, kLoadQPerTile}, false},
    // candidate 2, N=1024: 271, N=4096: 309 TFLOP/s
    {90, 64, DType::f16, {128, 64, 4, 2, kLoadQResident}, true},
    // candidate 2, N=1024: 280, N=4096: 317 TFLOP/s
    {90, 64, DType::bf16, {128, 64, 4, 2, kLoadQResident}, true},
    // candidate 12, N=1024: 293, N=4096: 310 TFLOP/s
    {90, 128, DType::f16, {128, 32, 4, 2, kLoadQPerTile}, true},
    // candidate 12, N=1024: 293, N=4096: 318 TFLOP/s
    {90, 128, DType::bf16, {128, 32, 4, 2, kLoadQPerTile}, true},
};

}  // namespace fl::k15_store_path
