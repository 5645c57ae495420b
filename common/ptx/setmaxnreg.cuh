// setmaxnreg: moves registers between the warpgroups of a block at run time (Hopper, sm_90a).
//   PTX ISA: "Miscellaneous instructions: setmaxnreg".
//
// A kernel launched with __launch_bounds__(threads, 1) starts every thread with the same register
// budget (65536 / threads, rounded down to a multiple of 8). A warpgroup that needs few (a TMA
// producer) releases some with dec; one that needs many (a consumer holding S, P and O) takes them
// with inc, which waits until enough are free. The count is a multiple of 8 in [24, 256], every
// warp of the warpgroup executes the same instruction (.sync.aligned), and each role must be one
// branch of a single if/else on the warpgroup index; when ptxas cannot honour it, it warns (C7508)
// and ignores it, which the build's test treats as an error.
#pragma once

#include <cstdint>

namespace fl::ptx {

template <uint32_t kRegs>
__device__ __forceinline__ void setmaxnreg_inc() {
  static_assert(kRegs % 8 == 0 && kRegs >= 24 && kRegs <= 256, "setmaxnreg: 24..256, step 8");
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

template <uint32_t kRegs>
__device__ __forceinline__ void setmaxnreg_dec() {
  static_assert(kRegs % 8 == 0 && kRegs >= 24 && kRegs <= 256, "setmaxnreg: 24..256, step 8");
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

}  // namespace fl::ptx
