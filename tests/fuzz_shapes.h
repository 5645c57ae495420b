// The shape generator of the fuzz test (tests/test_fuzz.cu): random attention problems from a
// seed. Host code only, so that its determinism is tested without a GPU (test_fuzz_shapes.cpp);
// and env_u64, the fuzz tests' reading of FL_FUZZ_SEED, FL_FUZZ_CASES and FL_FUZZ_ONLY.
//
// Case `index` of kernel `number` under seed S is drawn from a stream of its own, seeded from
// (S, number, index): a failing case is rerun alone (FL_FUZZ_ONLY=index) and gives the same
// problem whatever ran before it and whichever kernels the build has.
#pragma once

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <random>
#include <sstream>
#include <string>

#include "common/attention.h"
#include "common/harness.h"
#include "common/registry.h"

namespace fl::fuzz {

constexpr uint64_t kDefaultSeed = 20250605;
constexpr int kDefaultCases = 20;  // per kernel, in ctest
constexpr int64_t kMaxLen = 700;  // Nq, Nk in [1, kMaxLen]
// Draws per case before giving up on a kernel claiming one. The narrowest rungs claim about one
// draw in six (lengths snapped to the tile, non-causal, d in {64, 128}), so 400 refusals in a row
// mean the kernel refuses what it should claim, and the test says so.
constexpr int kMaxDraws = 400;

// The value of environment variable `name` as an unsigned integer, or `fallback` when it is
// unset. A malformed value fails the test rather than quietly running the default budget.
inline uint64_t env_u64(const char* name, uint64_t fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(text, &end, 10);
  if (errno != 0 || *end != '\0' || text[0] == '-') {
    ADD_FAILURE() << name << " must be an unsigned integer, got '" << text << "'";
    return fallback;
  }
  return v;
}

inline std::mt19937_64 case_rng(uint64_t seed, int kernel_number, uint64_t index) {
  // std::seed_seq and std::mt19937_64 are specified exactly by the standard: the same numbers
  // with every compiler and standard library.
  std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32),
                    static_cast<uint32_t>(kernel_number), static_cast<uint32_t>(index),
                    static_cast<uint32_t>(index >> 32)};
  return std::mt19937_64(seq);
}

// An integer in [lo, hi]. Not std::uniform_int_distribution: its algorithm differs between
// standard libraries, and a seed must name the same cases everywhere. (The modulo bias, below
// 2^-50 for these ranges, does not matter here.)
inline int64_t uniform(std::mt19937_64& rng, int64_t lo, int64_t hi) {
  return lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1));
}
inline bool coin(std::mt19937_64& rng) { return (rng() >> 63) != 0; }
inline double unit(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

// A sequence length: a multiple of `tile` when `snapped` (the tiled rungs claim only those),
// else any length in [1, kMaxLen], a quarter of them short (1..16, shorter than any tile).
inline int64_t draw_length(std::mt19937_64& rng, bool snapped, int tile) {
  if (snapped) {
    const int64_t t = tile < 1 ? 1 : tile;
    return t * uniform(rng, 1, kMaxLen / t < 1 ? 1 : kMaxLen / t);
  }
  return uniform(rng, 0, 3) == 0 ? uniform(rng, 1, 16) : uniform(rng, 1, kMaxLen);
}

// The block shape of the kernel under test for a drawn problem (whose lengths are still 1).
using TileOf = std::function<TileShape(const ProblemSpec&)>;

// One random problem. Memory stays small: at most B = 3, H_q = 12, N = 700, d = 256, i.e.
// 13 MB per tensor and 70 MB for the reference's fp32 scores.
inline ProblemSpec draw_spec(std::mt19937_64& rng, const TileOf& tile_of) {
  static constexpr int64_t kHeadDims[] = {64, 128, 256};
  ProblemSpec s;
  s.dtype = coin(rng) ? DType::bf16 : DType::f16;
  s.batch = uniform(rng, 1, 3);
  s.heads_kv = uniform(rng, 1, 3);
  s.heads_q = s.heads_kv * uniform(rng, 1, 4);  // G = H_q / H_kv in 1..4
  s.head_dim = kHeadDims[uniform(rng, 0, 2)];
  s.causal = coin(rng);
  s.layout = coin(rng) ? Layout::BNHD : Layout::BHND;
  s.with_lse = coin(rng);
  // Half the time the default 1/sqrt(d) (scale 0), else a scale in [0.02, 0.3].
  s.scale = coin(rng) ? 0.f : static_cast<float>(0.02 + 0.28 * unit(rng));
  s.seed = rng();
  // Lengths last: the tile of the autotuned rungs depends on d and the dtype drawn above. Half
  // the cases snap both lengths to the tile, half take any length; a quarter set Nk = Nq (the
  // common square case) where the tile allows it.
  s.seqlen_q = s.seqlen_k = 1;
  const TileShape tile = tile_of(s);
  const bool snapped = coin(rng);
  s.seqlen_q = draw_length(rng, snapped, tile.br);
  const bool square = uniform(rng, 0, 3) == 0 && (!snapped || s.seqlen_q % tile.bc == 0);
  s.seqlen_k = square ? s.seqlen_q : draw_length(rng, snapped, tile.bc);
  return s;
}

// The AttnParams fl::Problem builds for `s` (sizes, strides, scale, types), with placeholder
// addresses for the tensors (and descale factors of 1 for e4m3 inputs): why_unsupported and tile()
// read only the sizes, the strides, the types and the pointers' alignment, so a draw the kernel
// refuses costs no allocation. Never launched; the test checks the claim again on the real
// Problem before running it.
inline AttnParams shape_params(const ProblemSpec& s) { return placeholder_params(s); }

// A drawn case in the input type of a kernel with fp8_inputs: e4m3 inputs (the same seeded values,
// quantised), the drawn 16-bit type as O's, descale factors per head for an odd data seed (a
// function of the draw, so that a case reruns alone as it ran).
inline ProblemSpec as_e4m3(ProblemSpec s) {
  s.out_dtype = s.dtype;
  s.dtype = DType::e4m3;
  s.descale_per_head = (s.seed & 1) != 0;
  return s;
}

// ProblemSpec::describe() plus what it leaves out and a fuzz case varies: LSE, scale, data seed.
inline std::string describe_case(const ProblemSpec& s) {
  std::ostringstream os;
  os << s.describe() << (s.with_lse ? " lse" : "") << " scale="
     << (s.scale > 0.f ? std::to_string(s.scale) : std::string("1/sqrt(d)"))
     << " data_seed=" << s.seed;
  return os.str();
}

}  // namespace fl::fuzz
