// Building blocks of the Hopper rungs (17+), each tested alone before a kernel relies on it:
//   1. the wgmma matrix descriptor, encoded on the CPU: every field at its bit position;
//   2. the 128-byte swizzle formula the descriptor and TMA share (host);
//   3. one warpgroup's wgmma.mma_async m64nNk16 against a CPU matmul: SS (A and B from shared
//      memory, K-major, as S = Q·Kᵀ), RS (A from registers, as P) with B K-major and with B
//      MN-major through the transpose bit (as V); fp16 and bf16; the accumulator written out
//      through the documented thread -> (row, column) map;
//   3b. the same for fp8 e4m3 (m64nNk32, SS and RS, both operands K-major), and P·V with P packed
//       from accumulator-layout registers against V^T with permuted keys: rung 28's plan;
//   4. one TMA box into a 128-byte-swizzled tile, checked element by element against the global
//      tensor through the swizzle formula, inside the tensor and at its edge (zero fill);
//   5. an mbarrier ring of 2 stages driven through 40 TMA loads (full/empty barriers, parity
//      waits): a consumer that read a stage early would copy the tile of two loads before;
//   6. the way out: a warpgroup's accumulator-layout fragment through stmatrix into a swizzled
//      tile, then one TMA store of the box, inside the tensor and clipped at its end;
//   7. programmatic dependent launch: a second grid that starts while the first runs, and waits
//      (griddepcontrol.wait) before it reads the first's writes;
//   8. thread block clusters: each block reads the shared memory of the others of its cluster
//      (mapa, ld.shared::cluster, one and four floats) after a cluster barrier; a barrier whose
//      arrive is relaxed still holds every block until the last thread of the cluster arrives.
// Every comparison is exact: small integers are exact in fp16, bf16 and fp32 sums; TMA moves bits.
// GPU tests need compute capability 9.0 (this binary holds sm_90a code only) and skip otherwise.
//
//   test_hopper_ptx --gtest_filter='GmmaDesc*:Sw128*'   # the host part
#include <gtest/gtest.h>

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "common/clusters.h"
#include "common/cuda_check.h"
#include "common/device_buffer.h"
#include "common/fp8.h"
#include "common/ptx/cluster.cuh"
#include "common/ptx/cvt_fp8.cuh"
#include "common/ptx/fence_proxy.cuh"
#include "common/ptx/gmma_desc.cuh"
#include "common/ptx/griddep.cuh"
#include "common/ptx/mbarrier.cuh"
#include "common/ptx/smem.cuh"
#include "common/ptx/stmatrix.cuh"
#include "common/ptx/tma.cuh"
#include "common/ptx/wgmma.cuh"
#include "common/tensor_map.h"

namespace {

namespace gmma = fl::ptx::gmma;

// ---------------------------------------------------------------------------------------------
// 1-2. Host: the descriptor and the swizzle
// ---------------------------------------------------------------------------------------------

TEST(GmmaDesc, FieldsAtTheirBitPositions) {
  // One field at a time: value >> 4 lands at the field's lowest bit.
  EXPECT_EQ(gmma::encode({0x1230, 0, 0, 0, gmma::Layout::kNone}), uint64_t{0x123});
  EXPECT_EQ(gmma::encode({0, 0x450, 0, 0, gmma::Layout::kNone}), uint64_t{0x45} << 16);
  EXPECT_EQ(gmma::encode({0, 0, 0x780, 0, gmma::Layout::kNone}), uint64_t{0x78} << 32);
  EXPECT_EQ(gmma::encode({0, 0, 0, 5, gmma::Layout::kNone}), uint64_t{5} << 49);
  EXPECT_EQ(gmma::encode({0, 0, 0, 0, gmma::Layout::k128B}), uint64_t{1} << 62);
  EXPECT_EQ(gmma::encode({0, 0, 0, 0, gmma::Layout::k64B}), uint64_t{2} << 62);
  EXPECT_EQ(gmma::encode({0, 0, 0, 0, gmma::Layout::k32B}), uint64_t{3} << 62);
  // Fields are 14 bits wide: the largest values fill them exactly and touch nothing else.
  EXPECT_EQ(gmma::encode({0x3FFF0, 0x3FFF0, 0x3FFF0, 7, gmma::Layout::k32B}),
            uint64_t{0x3FFF} | (uint64_t{0x3FFF} << 16) | (uint64_t{0x3FFF} << 32) |
                (uint64_t{7} << 49) | (uint64_t{3} << 62));
}

TEST(GmmaDesc, DecodeInvertsEncode) {
  std::mt19937 rng(7);
  for (int i = 0; i < 1000; ++i) {
    gmma::DescFields f;
    f.start_addr = (rng() & 0x3FFF) << 4;
    f.lbo = (rng() & 0x3FFF) << 4;
    f.sbo = (rng() & 0x3FFF) << 4;
    f.base_offset = rng() & 7;
    f.layout = static_cast<gmma::Layout>(rng() & 3);
    const gmma::DescFields g = gmma::decode(gmma::encode(f));
    ASSERT_EQ(g.start_addr, f.start_addr);
    ASSERT_EQ(g.lbo, f.lbo);
    ASSERT_EQ(g.sbo, f.sbo);
    ASSERT_EQ(g.base_offset, f.base_offset);
    ASSERT_EQ(g.layout, f.layout);
  }
}

TEST(GmmaDesc, TheTwoOperandKindsOfTheLadder) {
  // K-major (Q, K): SBO = 1024 (8 rows of 128 bytes), LBO encoded as 1, 128-byte swizzle.
  const gmma::DescFields k = gmma::decode(gmma::kmajor_sw128(0x8400));
  EXPECT_EQ(k.start_addr, 0x8400u);
  EXPECT_EQ(k.sbo, 1024u);
  EXPECT_EQ(k.lbo, 16u);
  EXPECT_EQ(k.layout, gmma::Layout::k128B);
  EXPECT_EQ(k.base_offset, 0u);
  // MN-major (V): LBO = the distance between the 64-column blocks, here 128 keys x 128 bytes.
  const gmma::DescFields v = gmma::decode(gmma::mnmajor_sw128(0x10000, 128 * 128));
  EXPECT_EQ(v.lbo, 16384u);
  EXPECT_EQ(v.sbo, 1024u);
  EXPECT_EQ(v.layout, gmma::Layout::k128B);
  // A k-step moves the start address only.
  const uint64_t d = gmma::kmajor_sw128(0x8400);
  EXPECT_EQ(gmma::decode(gmma::advance(d, 96)).start_addr, 0x8400u + 96);
  EXPECT_EQ(gmma::advance(d, 96) & ~uint64_t{0x3FFF}, d & ~uint64_t{0x3FFF});
  // K-major in the 64-byte swizzle (rung 28's e4m3 Q and K at d = 64: 64-byte rows): SBO = 512
  // (8 rows of 64 bytes), layout code 2.
  const gmma::DescFields k64 = gmma::decode(gmma::kmajor_sw64(0x9000));
  EXPECT_EQ(k64.start_addr, 0x9000u);
  EXPECT_EQ(k64.sbo, 512u);
  EXPECT_EQ(k64.lbo, 16u);
  EXPECT_EQ(k64.layout, gmma::Layout::k64B);
  EXPECT_EQ(gmma::kmajor_sw64(0x9000) >> 62, 2u);
  // MN-major in the 64-byte swizzle (rung 71's V at d = 96): LBO = the distance between the
  // 32-column blocks, here 64 keys x 64 bytes; SBO = 512.
  const gmma::DescFields v64 = gmma::decode(gmma::mnmajor_sw64(0xA000, 64 * 64));
  EXPECT_EQ(v64.start_addr, 0xA000u);
  EXPECT_EQ(v64.lbo, 4096u);
  EXPECT_EQ(v64.sbo, 512u);
  EXPECT_EQ(v64.layout, gmma::Layout::k64B);
}

TEST(Sw128, EveryRowIsAPermutationOfItsChunks) {
  // 8 consecutive rows x 8 chunks of 16 bytes: each (row, chunk) lands on a distinct 16-byte
  // slot of the 1024-byte group, and chunk c of row r sits at slot c ^ (r % 8) of row r.
  for (uint32_t rows : {64u, 128u}) {
    std::set<uint32_t> seen;
    for (uint32_t r = 0; r < rows; ++r) {
      for (uint32_t c = 0; c < 128; c += 8) {
        const uint32_t off = gmma::sw128_offset(r, c, rows);
        EXPECT_EQ(off % 16, 0u);
        EXPECT_EQ(off, (c / 64) * rows * 128 + r * 128 + ((((c % 64) / 8) ^ (r % 8)) * 16));
        EXPECT_TRUE(seen.insert(off).second) << "two chunks at byte " << off;
      }
    }
    EXPECT_EQ(seen.size(), rows * 16);
    // Elements inside a chunk stay in order.
    EXPECT_EQ(gmma::sw128_offset(3, 21, rows), gmma::sw128_offset(3, 16, rows) + 10);
  }
}

TEST(Sw64, EveryRowIsAPermutationOfItsChunks) {
  // 8 consecutive rows x 4 chunks of 16 bytes of each 32-column block: each (row, chunk) lands
  // on a distinct 16-byte slot of the 512-byte group, chunk c of row r at slot c ^ ((r / 2) % 4)
  // of row r; rows of 96 columns are three blocks, `rows` x 64 bytes apart.
  for (uint32_t rows : {64u, 128u}) {
    std::set<uint32_t> seen;
    for (uint32_t r = 0; r < rows; ++r) {
      for (uint32_t c = 0; c < 96; c += 8) {
        const uint32_t off = gmma::sw64_offset(r, c, rows);
        EXPECT_EQ(off % 16, 0u);
        EXPECT_EQ(off, (c / 32) * rows * 64 + r * 64 + ((((c % 32) / 8) ^ ((r / 2) % 4)) * 16));
        EXPECT_TRUE(seen.insert(off).second) << "two chunks at byte " << off;
        EXPECT_LT(off, rows * 96 * 2);
      }
    }
    EXPECT_EQ(seen.size(), rows * 12);
    EXPECT_EQ(gmma::sw64_offset(5, 45, rows), gmma::sw64_offset(5, 40, rows) + 10);
    // 8 rows are a whole period: a copy that steps 8 rows moves every chunk by 8 x 64 bytes
    // (rung 71's copies at d = 96 add that constant instead of working out each offset).
    for (uint32_t r = 0; r + 8 < rows; ++r) {
      for (uint32_t c = 0; c < 96; c += 8) {
        EXPECT_EQ(gmma::sw64_offset(r + 8, c, rows), gmma::sw64_offset(r, c, rows) + 8 * 64);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// GPU helpers
// ---------------------------------------------------------------------------------------------

bool hopper_ready(std::string* why) {
  if (!fl::gpu_available(why)) return false;
  int device = 0, major = 0, minor = 0;
  FL_CUDA_CHECK(cudaGetDevice(&device));
  FL_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  FL_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  if (major != 9 || minor != 0) {
    *why = "wgmma, TMA and setmaxnreg are sm_90a instructions: this test needs compute "
           "capability 9.0 (device has " + std::to_string(major) + "." + std::to_string(minor) +
           ")";
    return false;
  }
  return true;
}

#define REQUIRE_HOPPER()                             \
  do {                                               \
    std::string why_;                                \
    if (!hopper_ready(&why_)) GTEST_SKIP() << why_;  \
  } while (0)

// The kernels below start their tiles at the first 1024-byte boundary of the dynamic shared
// memory (the 128-byte swizzle repeats every 1024 bytes): the launches ask for 1 KiB more.

template <typename T>
uint16_t to_bits(float x);
template <>
uint16_t to_bits<__half>(float x) {
  const __half h = __float2half(x);
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}
template <>
uint16_t to_bits<__nv_bfloat16>(float x) {
  const __nv_bfloat16 h = __float2bfloat16(x);
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}

// Small random integers in [-3, 3]: exact in fp16/bf16, and every dot product of up to 128 terms
// is an integer below 2^11, exact in fp32 whatever the order of the additions.
std::vector<float> small_ints(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(static_cast<int>(rng() % 7) - 3);
  return v;
}

template <typename T>
fl::DeviceBuffer upload(const std::vector<float>& v) {
  std::vector<uint16_t> bits(v.size());
  for (size_t i = 0; i < v.size(); ++i) bits[i] = to_bits<T>(v[i]);
  fl::DeviceBuffer d(bits.size() * 2);
  FL_CUDA_CHECK(cudaMemcpy(d.get(), bits.data(), bits.size() * 2, cudaMemcpyHostToDevice));
  return d;
}

// Writes the accumulator to D[64][N] through the map of common/ptx/wgmma.cuh's banner.
template <int N>
__device__ void store_accumulator(const float (&d)[N / 2], float* D) {
  const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
  const int row = 16 * warp + lane / 4, col = 2 * (lane % 4);
#pragma unroll
  for (int b = 0; b < N / 8; ++b) {
    D[row * N + 8 * b + col] = d[4 * b + 0];
    D[row * N + 8 * b + col + 1] = d[4 * b + 1];
    D[(row + 8) * N + 8 * b + col] = d[4 * b + 2];
    D[(row + 8) * N + 8 * b + col + 1] = d[4 * b + 3];
  }
}

// Copies a row-major [rows][cols] global matrix into a shared tile in the 128-byte swizzle
// (kSwizzle 128: 64-column blocks) or the 64-byte one (64: 32-column blocks).
template <typename T, int kSwizzle = 128>
__device__ void fill_swizzled(uint8_t* tile, const T* g, int rows, int cols) {
  for (int i = threadIdx.x; i < rows * cols; i += blockDim.x) {
    const int r = i / cols, c = i % cols;
    const uint32_t at =
        kSwizzle == 128 ? gmma::sw128_offset(r, c, rows) : gmma::sw64_offset(r, c, rows);
    *reinterpret_cast<T*>(tile + at) = g[i];
  }
}

// ---------------------------------------------------------------------------------------------
// 3. wgmma
// ---------------------------------------------------------------------------------------------

// D[64][N] = A[64][K] · B[N][K]ᵀ, both operands from shared memory, K-major (as S = Q·Kᵀ), in
// the 128-byte swizzle or (kSwizzle 64) the 64-byte one.
template <typename T, int N, int K, int kSwizzle = 128>
__global__ void wgmma_ss_kernel(const T* A, const T* B, float* D) {
  extern __shared__ uint8_t smem_raw[];
  uint8_t* sA = smem_raw + ((1024 - fl::ptx::smem_addr(smem_raw) % 1024) % 1024);  // [64][K]: K / 64 blocks of 64 x 128 bytes
  uint8_t* sB = sA + 64 * K * 2;       // [N][K]: K / 64 blocks of N x 128 bytes
  fill_swizzled<T, kSwizzle>(sA, A, 64, K);
  fill_swizzled<T, kSwizzle>(sB, B, N, K);
  fl::ptx::fence_proxy_async_shared();  // st.shared above, wgmma (async proxy) below
  __syncthreads();
  float d[N / 2];
  const uint64_t desc_a = kSwizzle == 128 ? gmma::kmajor_sw128(fl::ptx::smem_addr(sA))
                                          : gmma::kmajor_sw64(fl::ptx::smem_addr(sA));
  const uint64_t desc_b = kSwizzle == 128 ? gmma::kmajor_sw128(fl::ptx::smem_addr(sB))
                                          : gmma::kmajor_sw64(fl::ptx::smem_addr(sB));
  constexpr int kSteps = kSwizzle / 32;  // k-steps of 32 bytes a block's row holds
  fl::ptx::wgmma::fence();
#pragma unroll
  for (int s = 0; s < K / 16; ++s) {  // k-step s: block s / kSteps, 32 (s % kSteps) bytes in
    fl::ptx::wgmma::Wgmma<T, N>::template ss<0>(
        d, gmma::advance(desc_a, (s / kSteps) * 64 * kSwizzle + (s % kSteps) * 32),
        gmma::advance(desc_b, (s / kSteps) * N * kSwizzle + (s % kSteps) * 32), s > 0);
  }
  fl::ptx::wgmma::commit_group();
  fl::ptx::wgmma::wait_group<0>();
  fl::ptx::wgmma::fence_operands(d);
  store_accumulator<N>(d, D);
}

// D[64][N] = A[64][K] · B, A from registers (as P), B from shared memory: [K][N] MN-major with
// the transpose bit (as V) when kTransB, else [N][K] K-major; in the 128-byte swizzle or
// (kSwizzle 64) the 64-byte one.
template <typename T, int N, int K, int kTransB, int kSwizzle = 128>
__global__ void wgmma_rs_kernel(const T* A, const T* B, float* D) {
  extern __shared__ uint8_t smem_raw[];
  uint8_t* sB = smem_raw + ((1024 - fl::ptx::smem_addr(smem_raw) % 1024) % 1024);
  if (kTransB) {
    fill_swizzled<T, kSwizzle>(sB, B, K, N);  // [K][N]: blocks of N's columns, K x kSwizzle bytes
  } else {
    fill_swizzled<T, kSwizzle>(sB, B, N, K);
  }
  fl::ptx::fence_proxy_async_shared();
  __syncthreads();
  // A fragment of k-step s for this thread: rows g and g + 8 of the warp's 16, k 2q, +1, +8, +9.
  const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
  const int row = 16 * warp + lane / 4, k0 = 2 * (lane % 4);
  auto pair = [&](int r, int k) {
    const uint16_t* a = reinterpret_cast<const uint16_t*>(A);
    return static_cast<uint32_t>(a[r * K + k]) | (static_cast<uint32_t>(a[r * K + k + 1]) << 16);
  };
  uint32_t a[K / 16][4];
#pragma unroll
  for (int s = 0; s < K / 16; ++s) {
    a[s][0] = pair(row, 16 * s + k0);
    a[s][1] = pair(row + 8, 16 * s + k0);
    a[s][2] = pair(row, 16 * s + 8 + k0);
    a[s][3] = pair(row + 8, 16 * s + 8 + k0);
  }
  float d[N / 2];
  const uint32_t base = fl::ptx::smem_addr(sB);
  const uint64_t desc_b =
      kSwizzle == 128 ? (kTransB ? gmma::mnmajor_sw128(base, K * 128) : gmma::kmajor_sw128(base))
                      : (kTransB ? gmma::mnmajor_sw64(base, K * 64) : gmma::kmajor_sw64(base));
  constexpr int kSteps = kSwizzle / 32;
  fl::ptx::wgmma::fence();
#pragma unroll
  for (int s = 0; s < K / 16; ++s) {
    // MN-major: k-step s is 16 rows (keys) further, 16 x kSwizzle bytes; K-major as in the SS
    // case.
    const uint32_t step = kTransB ? s * 16 * kSwizzle
                                  : (s / kSteps) * N * kSwizzle + (s % kSteps) * 32;
    fl::ptx::wgmma::Wgmma<T, N>::template rs<kTransB>(d, a[s], gmma::advance(desc_b, step),
                                                      s > 0);
  }
  fl::ptx::wgmma::commit_group();
  fl::ptx::wgmma::wait_group<0>();
  fl::ptx::wgmma::fence_operands(d);
  store_accumulator<N>(d, D);
}

// Waits for the kernel, copies D[64][N] back and compares it with `ref` exactly.
void expect_exact(const fl::DeviceBuffer& dD, const std::vector<float>& ref, int N) {
  FL_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> out(64 * N);
  FL_CUDA_CHECK(cudaMemcpy(out.data(), dD.get(), dD.bytes(), cudaMemcpyDeviceToHost));
  int wrong = 0;
  for (int i = 0; i < 64 * N; ++i) {
    if (out[i] != ref[i] && ++wrong <= 5) {
      ADD_FAILURE() << "D[" << i / N << "][" << i % N << "] = " << out[i] << ", expected "
                    << ref[i];
    }
  }
  EXPECT_EQ(wrong, 0) << "elements wrong of " << 64 * N;
}

enum class Kind { kSS, kRSKMajorB, kRSTransposedB };

template <typename T, int N, int K, Kind kKind, int kSwizzle = 128>
void check_wgmma(uint32_t seed) {
  const std::vector<float> a = small_ints(64 * K, seed), b = small_ints(N * K, seed + 1);
  // b is read as [N][K] (K-major) or as [K][N] (transposed kind).
  std::vector<float> ref(64 * N, 0.f);
  for (int i = 0; i < 64; ++i) {
    for (int j = 0; j < N; ++j) {
      double acc = 0;
      for (int k = 0; k < K; ++k) {
        const float bkj = kKind == Kind::kRSTransposedB ? b[k * N + j] : b[j * K + k];
        acc += static_cast<double>(a[i * K + k]) * bkj;
      }
      ref[i * N + j] = static_cast<float>(acc);
    }
  }
  fl::DeviceBuffer dA = upload<T>(a), dB = upload<T>(b), dD(64 * N * 4);
  FL_CUDA_CHECK(cudaMemset(dD.get(), 0xFF, dD.bytes()));  // NaN: unwritten outputs fail
  const T* pa = static_cast<const T*>(dA.get());
  const T* pb = static_cast<const T*>(dB.get());
  float* pd = static_cast<float*>(dD.get());
  if constexpr (kKind == Kind::kSS) {
    const int smem = (64 + N) * K * 2 + 1024;
    FL_CUDA_CHECK(cudaFuncSetAttribute(wgmma_ss_kernel<T, N, K, kSwizzle>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    wgmma_ss_kernel<T, N, K, kSwizzle><<<1, 128, smem>>>(pa, pb, pd);
  } else {
    constexpr int kTrans = kKind == Kind::kRSTransposedB ? 1 : 0;
    const int smem = N * K * 2 + 1024;
    FL_CUDA_CHECK(cudaFuncSetAttribute(wgmma_rs_kernel<T, N, K, kTrans, kSwizzle>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    wgmma_rs_kernel<T, N, K, kTrans, kSwizzle><<<1, 128, smem>>>(pa, pb, pd);
  }
  FL_CHECK_LAUNCH();
  expect_exact(dD, ref, N);
}

TEST(Wgmma, SS_m64n128k16_QKt_fp16) {
  REQUIRE_HOPPER();
  check_wgmma<__half, 128, 128, Kind::kSS>(11);
}
TEST(Wgmma, SS_m64n128k16_QKt_bf16) {
  REQUIRE_HOPPER();
  check_wgmma<__nv_bfloat16, 128, 128, Kind::kSS>(12);
}
TEST(Wgmma, SS_m64n64k16_fp16) {
  REQUIRE_HOPPER();
  check_wgmma<__half, 64, 64, Kind::kSS>(13);
}
TEST(Wgmma, RS_TransposedB_PV_fp16) {
  REQUIRE_HOPPER();
  check_wgmma<__half, 128, 64, Kind::kRSTransposedB>(14);
}
TEST(Wgmma, RS_TransposedB_PV_bf16) {
  REQUIRE_HOPPER();
  check_wgmma<__nv_bfloat16, 128, 128, Kind::kRSTransposedB>(15);
}
TEST(Wgmma, RS_KMajorB_fp16) {
  REQUIRE_HOPPER();
  check_wgmma<__half, 64, 128, Kind::kRSKMajorB>(16);
}
TEST(Wgmma, RS_KMajorB_bf16) {
  REQUIRE_HOPPER();
  check_wgmma<__nv_bfloat16, 128, 64, Kind::kRSKMajorB>(17);
}
// Rung 71's two at d = 96, in the 64-byte swizzle: S = Q K^T over 96 dims (six k-steps, three
// 32-column blocks), and O += P V with N = 96 (V MN-major, three blocks); d = 192's at N = 192
// in the 128-byte swizzle (three 64-column blocks).
TEST(Wgmma, SS_Sw64_K96_fp16) {
  REQUIRE_HOPPER();
  check_wgmma<__half, 64, 96, Kind::kSS, 64>(18);
}
TEST(Wgmma, RS_Sw64_TransposedB_N96_bf16) {
  REQUIRE_HOPPER();
  check_wgmma<__nv_bfloat16, 96, 64, Kind::kRSTransposedB, 64>(19);
}
TEST(Wgmma, SS_K192_and_RS_TransposedB_N192_fp16) {
  REQUIRE_HOPPER();
  check_wgmma<__half, 64, 192, Kind::kSS>(20);
  check_wgmma<__half, 192, 64, Kind::kRSTransposedB>(21);
}

// ---------------------------------------------------------------------------------------------
// 3b. fp8 e4m3: m64nNk32, both operands K-major (for rung 28)
// ---------------------------------------------------------------------------------------------

// Copies a row-major [rows][cols] byte matrix into 128-byte-swizzled 128-column blocks. The
// swizzle moves 16-byte chunks, so byte c of a row is byte c % 2 of 16-bit element c / 2 in
// gmma::sw128_offset's layout (a 128-byte row: 64 16-bit elements or 128 bytes).
__device__ void fill_swizzled_bytes(uint8_t* tile, const uint8_t* g, int rows, int cols) {
  for (int i = threadIdx.x; i < rows * cols; i += blockDim.x) {
    const int r = i / cols, c = i % cols;
    tile[gmma::sw128_offset(r, c / 2, rows) + c % 2] = g[i];
  }
}

// D[64][N] = A[64][K] · B[N][K]ᵀ in e4m3: SS (A from shared memory) or RS (A from registers, in
// the m16n8k32 8-bit A layout of common/ptx/wgmma.cuh). K bytes a row; k-step s (32 bytes) is
// block s / 4, 32 (s % 4) bytes into its rows, exactly as a 16-bit k16 step.
template <int N, int K, bool kRS>
__global__ void wgmma_e4m3_kernel(const uint8_t* A, const uint8_t* B, float* D) {
  extern __shared__ uint8_t smem_raw[];
  uint8_t* sA = smem_raw + ((1024 - fl::ptx::smem_addr(smem_raw) % 1024) % 1024);  // [64][K]
  uint8_t* sB = sA + 64 * K;                                                          // [N][K]
  fill_swizzled_bytes(sA, A, 64, K);
  fill_swizzled_bytes(sB, B, N, K);
  fl::ptx::fence_proxy_async_shared();
  __syncthreads();
  const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
  const int row = 16 * warp + lane / 4, k0 = 4 * (lane % 4);
  auto quad = [&](int r, int k) {  // bytes A[r][k .. k + 3], the lowest k in the lowest byte
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(A[r * K + k + i]) << (8 * i);
    return v;
  };
  uint32_t a[K / 32][4];
#pragma unroll
  for (int s = 0; s < K / 32; ++s) {
    a[s][0] = quad(row, 32 * s + k0);
    a[s][1] = quad(row + 8, 32 * s + k0);
    a[s][2] = quad(row, 32 * s + 16 + k0);
    a[s][3] = quad(row + 8, 32 * s + 16 + k0);
  }
  float d[N / 2];
  const uint64_t desc_a = gmma::kmajor_sw128(fl::ptx::smem_addr(sA));
  const uint64_t desc_b = gmma::kmajor_sw128(fl::ptx::smem_addr(sB));
  using W = fl::ptx::wgmma::Wgmma<__nv_fp8_e4m3, N>;
  fl::ptx::wgmma::fence();
#pragma unroll
  for (int s = 0; s < K / 32; ++s) {
    const uint64_t b = gmma::advance(desc_b, (s / 4) * N * 128 + (s % 4) * 32);
    if constexpr (kRS) {
      W::template rs<0>(d, a[s], b, s > 0);
    } else {
      W::template ss<0>(d, gmma::advance(desc_a, (s / 4) * 64 * 128 + (s % 4) * 32), b, s > 0);
    }
  }
  fl::ptx::wgmma::commit_group();
  fl::ptx::wgmma::wait_group<0>();
  fl::ptx::wgmma::fence_operands(d);
  store_accumulator<N>(d, D);
}

// Small integers in [-3, 3] are exact in e4m3 (fl::to_e4m3: common/fp8.h), and every sum of up to
// 256 products is an integer below 2^12: exact in fp32, and exact too if the fp8 accumulation
// keeps fewer bits (DeepSeek-V3's report measured about 14 on H800; not measured here), so the
// comparison is exact.
template <int N, int K, bool kRS>
void check_wgmma_e4m3(uint32_t seed) {
  const std::vector<float> a = small_ints(64 * K, seed), b = small_ints(N * K, seed + 1);
  std::vector<uint8_t> a8(a.size()), b8(b.size());
  for (size_t i = 0; i < a.size(); ++i) a8[i] = fl::to_e4m3(a[i]);
  for (size_t i = 0; i < b.size(); ++i) b8[i] = fl::to_e4m3(b[i]);
  std::vector<float> ref(64 * N, 0.f);
  for (int i = 0; i < 64; ++i) {
    for (int j = 0; j < N; ++j) {
      double acc = 0;
      for (int k = 0; k < K; ++k) acc += static_cast<double>(a[i * K + k]) * b[j * K + k];
      ref[i * N + j] = static_cast<float>(acc);
    }
  }
  fl::DeviceBuffer dA(a8.size()), dB(b8.size()), dD(64 * N * 4);
  FL_CUDA_CHECK(cudaMemcpy(dA.get(), a8.data(), a8.size(), cudaMemcpyHostToDevice));
  FL_CUDA_CHECK(cudaMemcpy(dB.get(), b8.data(), b8.size(), cudaMemcpyHostToDevice));
  FL_CUDA_CHECK(cudaMemset(dD.get(), 0xFF, dD.bytes()));  // NaN: unwritten outputs fail
  const int smem = (64 + N) * K + 1024;
  FL_CUDA_CHECK(cudaFuncSetAttribute(wgmma_e4m3_kernel<N, K, kRS>,
                                     cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  wgmma_e4m3_kernel<N, K, kRS><<<1, 128, smem>>>(static_cast<const uint8_t*>(dA.get()),
                                                 static_cast<const uint8_t*>(dB.get()),
                                                 static_cast<float*>(dD.get()));
  FL_CHECK_LAUNCH();
  expect_exact(dD, ref, N);
}

// P·V in e4m3 with P straight from an accumulator, as the FP8 rung plans it. An fp32 S/P
// accumulator gives thread (group g, quad q) the keys 8b + 2q, 8b + 2q + 1 of each 8-key block b;
// the RS A operand of a k32 step wants keys 4q .. 4q + 3 (and 16 + 4q ..) in each register. So
// the thread packs, for each 16-key group, its keys (2q, 2q + 1, 8 + 2q, 9 + 2q) as if they were
// (4q .. 4q + 3), and V^T is stored with the keys of every 16-key group permuted the same way:
// logical key 4q + i of the group holds physical key perm(4q + i), perm = (2q, 2q + 1, 8 + 2q,
// 9 + 2q)[i]. P·V sums over keys, so the same permutation on both sides cancels.
__host__ __device__ int fp8_key_perm(int l) {  // l in 0..15 -> physical key in the 16-key group
  const int q = l / 4, i = l % 4;
  return (i < 2 ? 2 * q + i : 8 + 2 * q + (i - 2));
}

// D[64][N] = P[64][K] · V[K][N]: P from each thread's accumulator-layout elements (fp32 in global,
// read as the thread would hold them), V^T [N][K] in shared memory with the permuted keys.
template <int N, int K>
__global__ void wgmma_e4m3_pv_kernel(const float* P, const uint8_t* Vt_perm, float* D) {
  extern __shared__ uint8_t smem_raw[];
  uint8_t* sB = smem_raw + ((1024 - fl::ptx::smem_addr(smem_raw) % 1024) % 1024);  // [N][K]
  fill_swizzled_bytes(sB, Vt_perm, N, K);
  fl::ptx::fence_proxy_async_shared();
  __syncthreads();
  const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
  const int row = 16 * warp + lane / 4, q = lane % 4;
  // The accumulator elements of this thread: P[r][8b + 2q + c], r = row or row + 8.
  auto p = [&](int r, int key) { return P[r * K + key]; };
  uint32_t a[K / 32][4];
#pragma unroll
  for (int s = 0; s < K / 32; ++s) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {  // the two 16-key groups of the k32 step
      const int k0 = 32 * s + 16 * half;
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int rr = row + 8 * r;
        a[s][2 * half + r] = fl::ptx::pack4_e4m3(p(rr, k0 + 2 * q), p(rr, k0 + 2 * q + 1),
                                                 p(rr, k0 + 8 + 2 * q), p(rr, k0 + 9 + 2 * q));
      }
    }
  }
  float d[N / 2];
  const uint64_t desc_b = gmma::kmajor_sw128(fl::ptx::smem_addr(sB));
  fl::ptx::wgmma::fence();
#pragma unroll
  for (int s = 0; s < K / 32; ++s) {
    fl::ptx::wgmma::Wgmma<__nv_fp8_e4m3, N>::template rs<0>(
        d, a[s], gmma::advance(desc_b, (s / 4) * N * 128 + (s % 4) * 32), s > 0);
  }
  fl::ptx::wgmma::commit_group();
  fl::ptx::wgmma::wait_group<0>();
  fl::ptx::wgmma::fence_operands(d);
  store_accumulator<N>(d, D);
}

TEST(WgmmaE4m3, PVFromAccumulatorLayoutWithPermutedKeys) {
  REQUIRE_HOPPER();
  constexpr int N = 128, K = 128;  // d = 128 output columns, 128 keys
  const std::vector<float> p = small_ints(64 * K, 51), v = small_ints(K * N, 52);
  std::vector<uint8_t> vt(N * K);
  for (int n = 0; n < N; ++n) {
    for (int l = 0; l < K; ++l) {
      const int key = (l / 16) * 16 + fp8_key_perm(l % 16);
      vt[n * K + l] = fl::to_e4m3(v[key * N + n]);
    }
  }
  std::vector<float> ref(64 * N, 0.f);
  for (int i = 0; i < 64; ++i) {
    for (int n = 0; n < N; ++n) {
      double acc = 0;
      for (int key = 0; key < K; ++key) acc += static_cast<double>(p[i * K + key]) * v[key * N + n];
      ref[i * N + n] = static_cast<float>(acc);
    }
  }
  // The permutation is one: every key of a group once.
  std::set<int> keys;
  for (int l = 0; l < 16; ++l) keys.insert(fp8_key_perm(l));
  ASSERT_EQ(keys.size(), 16u);
  fl::DeviceBuffer dP(p.size() * 4), dV(vt.size()), dD(64 * N * 4);
  FL_CUDA_CHECK(cudaMemcpy(dP.get(), p.data(), dP.bytes(), cudaMemcpyHostToDevice));
  FL_CUDA_CHECK(cudaMemcpy(dV.get(), vt.data(), vt.size(), cudaMemcpyHostToDevice));
  FL_CUDA_CHECK(cudaMemset(dD.get(), 0xFF, dD.bytes()));
  const int smem = N * K + 1024;
  wgmma_e4m3_pv_kernel<N, K><<<1, 128, smem>>>(static_cast<const float*>(dP.get()),
                                               static_cast<const uint8_t*>(dV.get()),
                                               static_cast<float*>(dD.get()));
  FL_CHECK_LAUNCH();
  expect_exact(dD, ref, N);
}

TEST(WgmmaE4m3, SS_m64n128k32_K128) {
  REQUIRE_HOPPER();
  check_wgmma_e4m3<128, 128, false>(41);
}
TEST(WgmmaE4m3, SS_m64n64k32_K256) {
  REQUIRE_HOPPER();
  check_wgmma_e4m3<64, 256, false>(43);
}
TEST(WgmmaE4m3, SS_m64n256k32_K128) {
  REQUIRE_HOPPER();
  check_wgmma_e4m3<256, 128, false>(45);
}
TEST(WgmmaE4m3, RS_m64n128k32_K128) {
  REQUIRE_HOPPER();
  check_wgmma_e4m3<128, 128, true>(47);
}

// ---------------------------------------------------------------------------------------------
// 4. TMA: one box into a swizzled tile
// ---------------------------------------------------------------------------------------------

constexpr int kBoxRows = 64;

// Loads the box at (c0, c1, c2, c3) and copies the shared tile's raw bytes out.
__global__ void tma_box_kernel(const __grid_constant__ CUtensorMap map, int c0, int c1, int c2,
                               int c3, uint16_t* out) {
  extern __shared__ uint8_t smem_raw[];
  uint8_t* tile = smem_raw + ((1024 - fl::ptx::smem_addr(smem_raw) % 1024) % 1024);
  __shared__ alignas(8) uint64_t bar;
  const uint32_t b = fl::ptx::smem_addr(&bar);
  if (threadIdx.x == 0) {
    fl::ptx::mbarrier::init(b, 1);
    fl::ptx::mbarrier::fence_init();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    fl::ptx::mbarrier::arrive_expect_tx(b, kBoxRows * 128);  // the whole box, zeros included
    fl::ptx::tma::load_4d(fl::ptx::smem_addr(tile), &map, b, c0, c1, c2, c3);
  }
  fl::ptx::mbarrier::wait(b, 0);
  const uint16_t* t = reinterpret_cast<const uint16_t*>(tile);
  for (int i = threadIdx.x; i < kBoxRows * 64; i += blockDim.x) out[i] = t[i];
}

TEST(Tma, BoxLandsInTheSwizzleAndZeroFillsPastTheEnd) {
  REQUIRE_HOPPER();
  // [B = 2][H = 3][N = 200][d = 128] fp16 bits, contiguous (BHND).
  constexpr int B = 2, H = 3, N = 200, D = 128;
  std::mt19937 rng(21);
  std::vector<uint16_t> host(static_cast<size_t>(B) * H * N * D);
  for (uint16_t& x : host) x = static_cast<uint16_t>(rng() | 1);  // never 0: zero fill shows
  fl::DeviceBuffer g(host.size() * 2);
  FL_CUDA_CHECK(cudaMemcpy(g.get(), host.data(), g.bytes(), cudaMemcpyHostToDevice));
  fl::Strides s;
  s.row = D;
  s.head = static_cast<int64_t>(N) * D;
  s.batch = static_cast<int64_t>(H) * N * D;
  const CUtensorMap map = fl::make_tensor_map_4d(g.get(), D, N, H, B, s, kBoxRows);
  fl::DeviceBuffer out(kBoxRows * 64 * 2);
  const int smem = kBoxRows * 128 + 1024;
  // A box inside the tensor, then one whose rows 192..255 run past N = 200.
  for (const int row0 : {64, 192}) {
    const int col0 = 64, head = 2, batch = 1;
    tma_box_kernel<<<1, 128, smem>>>(map, col0, row0, head, batch,
                                     static_cast<uint16_t*>(out.get()));
    FL_CHECK_LAUNCH();
    FL_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<uint16_t> tile(kBoxRows * 64);
    FL_CUDA_CHECK(cudaMemcpy(tile.data(), out.get(), out.bytes(), cudaMemcpyDeviceToHost));
    int wrong = 0;
    for (int r = 0; r < kBoxRows; ++r) {
      for (int c = 0; c < 64; ++c) {
        const uint16_t got = tile[gmma::sw128_offset(r, c, kBoxRows) / 2];
        const int n = row0 + r;
        const uint16_t want =
            n < N ? host[((static_cast<size_t>(batch) * H + head) * N + n) * D + col0 + c] : 0;
        if (got != want && ++wrong <= 5) {
          ADD_FAILURE() << "box row0 " << row0 << ": element (" << r << ", " << c << ") is "
                        << got << ", expected " << want;
        }
      }
    }
    EXPECT_EQ(wrong, 0) << "box at row " << row0;
  }
}

// ---------------------------------------------------------------------------------------------
// 5. An mbarrier ring: full/empty pairs, parity, many more loads than stages
// ---------------------------------------------------------------------------------------------

constexpr int kRingStages = 2, kRingLoads = 40;

// Warp 4 produces (one thread: wait "empty", arm "full" with the bytes, issue the TMA), warps 0-3
// consume (wait "full", copy the tile out unswizzled, arrive on "empty"). Load j uses stage j % 2
// for the (j / 2)-th time: its waits use parity (j / 2) % 2.
__global__ void ring_kernel(const __grid_constant__ CUtensorMap map, uint16_t* out) {
  extern __shared__ uint8_t smem_raw[];
  uint8_t* ring = smem_raw + ((1024 - fl::ptx::smem_addr(smem_raw) % 1024) % 1024);  // kRingStages x [64][64] 16-bit, swizzled
  __shared__ alignas(8) uint64_t full[kRingStages], empty[kRingStages];
  constexpr int kConsumers = 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kRingStages; ++s) {
      fl::ptx::mbarrier::init(fl::ptx::smem_addr(&full[s]), 1);
      fl::ptx::mbarrier::init(fl::ptx::smem_addr(&empty[s]), kConsumers);
    }
    fl::ptx::mbarrier::fence_init();
  }
  __syncthreads();
  if (threadIdx.x >= kConsumers) {  // the producer warp
    if (threadIdx.x == kConsumers) {
      for (int j = 0; j < kRingLoads; ++j) {
        const int s = j % kRingStages, use = j / kRingStages;
        if (use > 0) fl::ptx::mbarrier::wait(fl::ptx::smem_addr(&empty[s]), (use - 1) % 2);
        fl::ptx::mbarrier::arrive_expect_tx(fl::ptx::smem_addr(&full[s]), 64 * 128);
        fl::ptx::tma::load_4d(fl::ptx::smem_addr(ring + s * 64 * 128), &map, fl::ptx::smem_addr(&full[s]), 0,
                              64 * j, 0, 0);
      }
    }
    return;
  }
  for (int j = 0; j < kRingLoads; ++j) {
    const int s = j % kRingStages, use = j / kRingStages;
    fl::ptx::mbarrier::wait(fl::ptx::smem_addr(&full[s]), use % 2);
    const uint8_t* tile = ring + s * 64 * 128;
    for (int i = threadIdx.x; i < 64 * 64; i += kConsumers) {
      const int r = i / 64, c = i % 64;
      out[(static_cast<size_t>(j) * 64 + r) * 64 + c] =
          *reinterpret_cast<const uint16_t*>(tile + gmma::sw128_offset(r, c, 64));
    }
    fl::ptx::mbarrier::arrive(fl::ptx::smem_addr(&empty[s]));
  }
}

TEST(MbarrierRing, FortyLoadsThroughTwoStagesArriveInOrder) {
  REQUIRE_HOPPER();
  constexpr int kRows = 64 * kRingLoads, kCols = 64;
  std::mt19937 rng(31);
  std::vector<uint16_t> host(static_cast<size_t>(kRows) * kCols);
  for (uint16_t& x : host) x = static_cast<uint16_t>(rng());
  fl::DeviceBuffer g(host.size() * 2), out(host.size() * 2);
  FL_CUDA_CHECK(cudaMemcpy(g.get(), host.data(), g.bytes(), cudaMemcpyHostToDevice));
  fl::Strides s;
  s.row = kCols;
  s.head = s.batch = static_cast<int64_t>(kRows) * kCols;
  const CUtensorMap map = fl::make_tensor_map_4d(g.get(), kCols, kRows, 1, 1, s, 64);
  const int smem = kRingStages * 64 * 128 + 1024;
  std::vector<uint16_t> first;
  for (int run = 0; run < 3; ++run) {
    FL_CUDA_CHECK(cudaMemset(out.get(), 0, out.bytes()));
    ring_kernel<<<1, 160, smem>>>(map, static_cast<uint16_t*>(out.get()));
    FL_CHECK_LAUNCH();
    FL_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<uint16_t> got(host.size());
    FL_CUDA_CHECK(cudaMemcpy(got.data(), out.get(), out.bytes(), cudaMemcpyDeviceToHost));
    // The consumers' copy of load j is exactly rows 64j..64j+63: a stage read before its load
    // landed would hold load j - 2 (or zeros on the first use).
    size_t wrong = 0;
    for (size_t i = 0; i < host.size(); ++i) wrong += got[i] != host[i];
    EXPECT_EQ(wrong, 0u) << "run " << run << ": elements wrong of " << host.size();
    if (run == 0) {
      first = got;
    } else {
      EXPECT_EQ(got, first) << "run " << run << " differs bitwise from run 0";
    }
  }
}

// ---------------------------------------------------------------------------------------------
// 6. stmatrix into a swizzled tile, then a TMA store
// ---------------------------------------------------------------------------------------------

// Element (r, c) of the test's 64 x 64 box: distinct 16-bit bits, never 0.
__host__ __device__ uint16_t box_value(int r, int c) {
  return static_cast<uint16_t>(0x1000 + r * 64 + c);
}

// 128 threads hold the box in the wgmma accumulator layout (warp w rows 16w.., lane l rows l / 4
// and l / 4 + 8, columns 8b + 2 (l % 4) + {0, 1}), as 16-bit pairs; stmatrix writes it into the
// 128-byte swizzle (row r, 16-byte chunk c at chunk c ^ (r % 8)); one thread stores the box.
__global__ void stmatrix_store_kernel(const __grid_constant__ CUtensorMap map, int c1, int c2,
                                      int c3) {
  extern __shared__ uint8_t smem_raw[];
  uint8_t* tile = smem_raw + ((1024 - fl::ptx::smem_addr(smem_raw) % 1024) % 1024);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row = 16 * warp + lane / 4, col = 2 * (lane % 4);
  auto pair = [](int r, int c) {
    return static_cast<uint32_t>(box_value(r, c)) | (static_cast<uint32_t>(box_value(r, c + 1)) << 16);
  };
  // Two 8-column blocks per stmatrix.x4: matrices (rows 0-7, block b), (rows 8-15, b),
  // (rows 0-7, b + 1), (rows 8-15, b + 1); lane l addresses row l % 8 of matrix l / 8.
  for (int b = 0; b < 8; b += 2) {
    const int m = lane / 8;
    const int r = 16 * warp + (m % 2) * 8 + lane % 8;
    const uint32_t addr = fl::ptx::smem_addr(tile) + gmma::sw128_offset(r, 8 * (b + m / 2), 64);
    fl::ptx::stmatrix_x4(addr, pair(row, 8 * b + col), pair(row + 8, 8 * b + col),
                         pair(row, 8 * b + 8 + col), pair(row + 8, 8 * b + 8 + col));
  }
  fl::ptx::fence_proxy_async_shared();
  __syncthreads();
  if (threadIdx.x == 0) {
    fl::ptx::tma::store_4d(fl::ptx::smem_addr(tile), &map, 64, c1, c2, c3);
    fl::ptx::tma::commit_group();
    fl::ptx::tma::wait_group<0>();
  }
}

TEST(TmaStore, StmatrixTileLandsAtItsBoxAndIsClippedAtTheEnd) {
  REQUIRE_HOPPER();
  constexpr int B = 2, H = 2, N = 100, D = 128;  // BHND; the box: columns 64-127
  fl::Strides s;
  s.row = D;
  s.head = static_cast<int64_t>(N) * D;
  s.batch = static_cast<int64_t>(H) * N * D;
  const size_t elems = static_cast<size_t>(B) * H * N * D;
  fl::DeviceBuffer g(elems * 2);
  const CUtensorMap map = fl::make_tensor_map_4d(g.get(), D, N, H, B, s, 64);
  // A box inside the tensor (rows 8-71), then one whose rows 64-127 run past N = 100.
  for (const int row0 : {8, 64}) {
    const int head = 1, batch = 1;
    FL_CUDA_CHECK(cudaMemset(g.get(), 0, g.bytes()));
    stmatrix_store_kernel<<<1, 128, 64 * 128 + 1024>>>(map, row0, head, batch);
    FL_CHECK_LAUNCH();
    FL_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<uint16_t> host(elems);
    FL_CUDA_CHECK(cudaMemcpy(host.data(), g.get(), g.bytes(), cudaMemcpyDeviceToHost));
    size_t wrong = 0;
    for (int bb = 0; bb < B; ++bb)
      for (int hh = 0; hh < H; ++hh)
        for (int n = 0; n < N; ++n)
          for (int c = 0; c < D; ++c) {
            const bool in_box = bb == batch && hh == head && c >= 64 && n >= row0 && n < row0 + 64;
            const uint16_t want = in_box ? box_value(n - row0, c - 64) : 0;
            const uint16_t got = host[((static_cast<size_t>(bb) * H + hh) * N + n) * D + c];
            if (got != want && ++wrong <= 5) {
              ADD_FAILURE() << "box row0 " << row0 << ": (b " << bb << ", h " << hh << ", n " << n
                            << ", c " << c << ") is " << got << ", expected " << want;
            }
          }
    EXPECT_EQ(wrong, 0u) << "box at row " << row0;
  }
}

// Every block writes its own values into shared memory (value = 1 + block + 0.25 * index, exact
// in fp32), then one thread adds the whole run into `acc` with one bulk reduce (and a second
// block-sized run at `acc + offset` when offset > 0): the adds of all blocks land on the same
// floats, so the sum checks that each element was added once per block, atomically.
__global__ void bulk_reduce_kernel(float* acc, int floats, int offset) {
  extern __shared__ uint8_t smem_raw[];
  float* buf = reinterpret_cast<float*>(smem_raw);
  for (int i = threadIdx.x; i < floats; i += blockDim.x) buf[i] = 1.f + blockIdx.x + 0.25f * i;
  fl::ptx::fence_proxy_async_shared();
  __syncthreads();
  if (threadIdx.x == 0) {
    const uint32_t bytes = static_cast<uint32_t>(floats) * 4;
    fl::ptx::tma::reduce_add_1d_f32(acc, fl::ptx::smem_addr(buf), bytes);
    if (offset > 0) fl::ptx::tma::reduce_add_1d_f32(acc + offset, fl::ptx::smem_addr(buf), bytes);
    fl::ptx::tma::commit_group();
    fl::ptx::tma::wait_group<0>();
  }
}

TEST(BulkReduce, AddsSharedIntoGlobalOncePerBlockAndLeavesTheRestAlone) {
  REQUIRE_HOPPER();
  constexpr int kBlocks = 40, kFloats = 8192, kOffset = 4096;  // 32 KiB, as rung 36's dQ tile
  constexpr int kTotal = kOffset + kFloats + 64;  // 64 floats past the second run stay as set
  fl::DeviceBuffer g(kTotal * 4);
  std::vector<float> init(kTotal);
  for (int i = 0; i < kTotal; ++i) init[i] = -0.5f * (i % 7);
  FL_CUDA_CHECK(cudaMemcpy(g.get(), init.data(), g.bytes(), cudaMemcpyHostToDevice));
  float* acc = static_cast<float*>(g.get());
  bulk_reduce_kernel<<<kBlocks, 256, kFloats * 4>>>(acc, kFloats, kOffset);
  FL_CHECK_LAUNCH();
  FL_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> host(kTotal);
  FL_CUDA_CHECK(cudaMemcpy(host.data(), g.get(), g.bytes(), cudaMemcpyDeviceToHost));
  // Element j receives sum_b (1 + b + 0.25 i) for i = j (first run, j < kFloats) and for
  // i = j - kOffset (second run): integers and quarters below 2^24, exact in any order.
  auto run_sum = [&](int i) { return kBlocks * (1.0 + 0.25 * i) + kBlocks * (kBlocks - 1) / 2.0; };
  size_t wrong = 0;
  for (int j = 0; j < kTotal; ++j) {
    double want = init[j];
    if (j < kFloats) want += run_sum(j);
    if (j >= kOffset && j < kOffset + kFloats) want += run_sum(j - kOffset);
    if (host[j] != static_cast<float>(want) && ++wrong <= 5) {
      ADD_FAILURE() << "acc[" << j << "] = " << host[j] << ", expected " << want;
    }
  }
  EXPECT_EQ(wrong, 0u);
}

// ---------------------------------------------------------------------------------------------
// 7. Programmatic dependent launch (griddep.cuh)
// ---------------------------------------------------------------------------------------------

// The first grid: lets its dependent start at once, spins about `cycles` clock cycles, then writes
// data[i] = i + 1.
__global__ void griddep_first(int* data, long long cycles) {
  fl::ptx::griddep_launch_dependents();
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
  data[blockIdx.x * blockDim.x + threadIdx.x] = blockIdx.x * blockDim.x + threadIdx.x + 1;
}

// The dependent: each block notes whether the first grid's last element was still unwritten when
// it started (it ran beside the first grid), then waits and copies data.
__global__ void griddep_second(const int* data, int* copy, int* early, int n) {
  if (threadIdx.x == 0) {
    early[blockIdx.x] = *static_cast<const volatile int*>(data + n - 1) == 0;
  }
  fl::ptx::griddep_wait();
  copy[blockIdx.x * blockDim.x + threadIdx.x] = data[blockIdx.x * blockDim.x + threadIdx.x];
}

// The two grids on `stream`, the second launched as a programmatic dependent or plainly; the
// number of its blocks that started while the first still ran, and of elements copied wrong.
struct GriddepRun {
  int started_early = 0, wrong = 0;
};

GriddepRun run_griddep(cudaStream_t stream, bool dependent) {
  constexpr int kBlocks = 32, kThreads = 128, kN = kBlocks * kThreads;
  fl::DeviceBuffer data(kN * 4), copy(kN * 4), early(kBlocks * 4);
  FL_CUDA_CHECK(cudaMemset(data.get(), 0, kN * 4));
  FL_CUDA_CHECK(cudaMemset(copy.get(), 0, kN * 4));
  FL_CUDA_CHECK(cudaMemset(early.get(), 0, kBlocks * 4));
  FL_CUDA_CHECK(cudaDeviceSynchronize());
  griddep_first<<<kBlocks, kThreads, 0, stream>>>(data.as<int>(), 2000000);  // about 1 ms
  FL_CHECK_LAUNCH();
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(kBlocks);
  config.blockDim = dim3(kThreads);
  config.stream = stream;
  config.attrs = &attr;
  config.numAttrs = dependent ? 1 : 0;
  FL_CUDA_CHECK(cudaLaunchKernelEx(&config, griddep_second,
                                   static_cast<const int*>(data.as<int>()), copy.as<int>(),
                                   early.as<int>(), kN));
  FL_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<int> host(kN), early_host(kBlocks);
  FL_CUDA_CHECK(cudaMemcpy(host.data(), copy.get(), kN * 4, cudaMemcpyDeviceToHost));
  FL_CUDA_CHECK(cudaMemcpy(early_host.data(), early.get(), kBlocks * 4, cudaMemcpyDeviceToHost));
  GriddepRun r;
  for (int i = 0; i < kN; ++i) r.wrong += host[i] != i + 1;
  for (int b = 0; b < kBlocks; ++b) r.started_early += early_host[b];
  return r;
}

// Launched as a programmatic dependent, on a stream of its own and on the legacy default stream
// (stream 0), the second grid starts while the first still spins (some block sees the last element
// unwritten) and, after its wait, reads every element written; launched plainly, no block starts
// early. A wait that returned at once would copy zeros. Both kernels run once first and the
// first grid spins about 1 ms: an earlier version with neither (a 0.1 ms spin) saw 0 of 32 start
// early, even in its second launch pair, after both kernels had run once; which of the two
// changes mattered was not isolated.
TEST(Griddep, DependentStartsEarlyAndItsWaitSeesTheFirstGridsWrites) {
  REQUIRE_HOPPER();
  cudaStream_t own = nullptr;
  FL_CUDA_CHECK(cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking));
  {
    fl::DeviceBuffer warm(4 * 4);
    griddep_first<<<1, 4, 0, own>>>(warm.as<int>(), 0);
    griddep_second<<<1, 4, 0, own>>>(warm.as<int>(), warm.as<int>(), warm.as<int>() + 3, 4);
    FL_CHECK_LAUNCH();
    FL_CUDA_CHECK(cudaDeviceSynchronize());
  }
  for (bool dependent : {true, false}) {
    const GriddepRun r = run_griddep(own, dependent);
    const GriddepRun legacy = run_griddep(nullptr, dependent);
    std::cout << (dependent ? "dependent" : "plain") << ": blocks started early " << r.started_early
              << " of 32 on a stream of its own, " << legacy.started_early
              << " on the legacy default stream\n";
    SCOPED_TRACE(dependent ? "launched as a dependent" : "launched plainly");
    EXPECT_EQ(r.wrong, 0) << "elements copied before the first grid wrote them";
    EXPECT_EQ(legacy.wrong, 0) << "the same, on the legacy default stream";
    if (dependent) {
      EXPECT_GT(r.started_early, 0) << "no block of the dependent ran beside the first grid";
      EXPECT_GT(legacy.started_early, 0) << "the same, on the legacy default stream";
    } else {
      EXPECT_EQ(r.started_early, 0);
      EXPECT_EQ(legacy.started_early, 0);
    }
  }
  FL_CUDA_CHECK(cudaStreamDestroy(own));
}

// ---------------------------------------------------------------------------------------------
// 8. Thread block clusters (cluster.cuh)
// ---------------------------------------------------------------------------------------------

// Launches `kernel` on `blocks` blocks of 128 threads in clusters of `size` blocks (in x), with
// `smem` bytes of dynamic shared memory, and waits for it.
template <typename... Params, typename... Args>
void run_in_clusters(void (*kernel)(Params...), int blocks, int size, size_t smem, Args... args) {
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = static_cast<unsigned>(size);
  attr.val.clusterDim.y = attr.val.clusterDim.z = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(blocks));
  config.blockDim = dim3(128);
  config.dynamicSmemBytes = smem;
  config.attrs = &attr;
  config.numAttrs = 1;
  FL_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, args...));
  FL_CUDA_CHECK(cudaDeviceSynchronize());
}

// Clusters of kRanks blocks in x. Each block fills its shared memory with 1000 blockIdx.x + i
// (i < 128), then, after the cluster barrier, thread t reads element t of the block `t % kRanks`
// ranks on in its cluster (one float) and, every fourth thread, elements t .. t + 3 of the block
// one rank on (four floats); thread 0 writes the block's rank out. A last barrier keeps every
// block's memory until the others have read it.
constexpr int kRanks = 4;
__global__ void cluster_read_peers(float* one, float* four, int* rank_out) {
  __shared__ __align__(16) float tags[128];
  const int t = static_cast<int>(threadIdx.x);
  const uint32_t rank = fl::ptx::cluster::ctarank();
  tags[t] = 1000.f * blockIdx.x + t;
  fl::ptx::cluster::sync();
  const uint32_t base = fl::ptx::smem_addr(tags);
  const uint32_t peer = (rank + t % kRanks) % kRanks, next = (rank + 1) % kRanks;
  const int out = static_cast<int>(blockIdx.x) * 128 + t;
  one[out] = fl::ptx::cluster::ld_f32(fl::ptx::cluster::map(base + 4 * t, peer));
  if (t % 4 == 0) {
    const float4 v = fl::ptx::cluster::ld_v4_f32(fl::ptx::cluster::map(base + 4 * t, next));
    four[out] = v.x, four[out + 1] = v.y, four[out + 2] = v.z, four[out + 3] = v.w;
  }
  if (t == 0) rank_out[blockIdx.x] = static_cast<int>(rank);
  fl::ptx::cluster::sync();
}

// Eight blocks in two clusters of four: a block's rank is blockIdx.x % 4, and every value read is
// what the block of the expected rank in the same cluster wrote (a rank mapped to the wrong
// cluster, or to this block, reads another block's values).
TEST(Cluster, BlocksReadTheSharedMemoryOfTheirCluster) {
  REQUIRE_HOPPER();
  constexpr int kBlocks = 2 * kRanks, kN = kBlocks * 128;
  fl::DeviceBuffer one(kN * 4), four(kN * 4), ranks(kBlocks * 4);
  FL_CUDA_CHECK(cudaMemset(one.get(), 0xff, kN * 4));
  FL_CUDA_CHECK(cudaMemset(four.get(), 0xff, kN * 4));
  run_in_clusters(cluster_read_peers, kBlocks, kRanks, 0, one.as<float>(), four.as<float>(),
                  ranks.as<int>());
  std::vector<float> h_one(kN), h_four(kN);
  std::vector<int> h_ranks(kBlocks);
  FL_CUDA_CHECK(cudaMemcpy(h_one.data(), one.get(), kN * 4, cudaMemcpyDeviceToHost));
  FL_CUDA_CHECK(cudaMemcpy(h_four.data(), four.get(), kN * 4, cudaMemcpyDeviceToHost));
  FL_CUDA_CHECK(cudaMemcpy(h_ranks.data(), ranks.get(), kBlocks * 4, cudaMemcpyDeviceToHost));
  int wrong = 0;
  for (int b = 0; b < kBlocks; ++b) {
    const int rank = b % kRanks;
    EXPECT_EQ(h_ranks[b], rank) << "block " << b;
    for (int t = 0; t < 128; ++t) {
      const int first = b - rank;  // the cluster's first block
      const int peer = first + (rank + t % kRanks) % kRanks, next = first + (rank + 1) % kRanks;
      wrong += h_one[b * 128 + t] != 1000.f * peer + t;
      wrong += h_four[b * 128 + t] != 1000.f * next + t;
    }
  }
  EXPECT_EQ(wrong, 0);
}

// The time on the GPU's global timer, in nanoseconds (comparable between SMs).
__device__ __forceinline__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(t));
  return t;
}

// Clusters of two. In rank 0, thread 0 waits about 200 us, notes the time, then arrives (relaxed);
// every other thread of the cluster arrives at once. After its wait, thread 0 of rank 1 notes the
// time: a barrier passes no thread before the last one has arrived, so it notes a later time.
__global__ void cluster_relaxed_barrier(unsigned long long* times) {
  const uint32_t rank = fl::ptx::cluster::ctarank();
  const int slot = static_cast<int>(blockIdx.x / 2) * 2;
  if (rank == 0 && threadIdx.x == 0) {
    const uint64_t start = global_ns();
    while (global_ns() - start < 200000) __nanosleep(1000);
    times[slot] = global_ns();
  }
  fl::ptx::cluster::arrive_relaxed();
  fl::ptx::cluster::wait();
  if (rank == 1 && threadIdx.x == 0) times[slot + 1] = global_ns();
}

TEST(Cluster, ARelaxedArriveStillWaitsForTheWholeCluster) {
  REQUIRE_HOPPER();
  constexpr int kBlocks = 8;
  fl::DeviceBuffer times(kBlocks * 8);
  FL_CUDA_CHECK(cudaMemset(times.get(), 0, kBlocks * 8));
  run_in_clusters(cluster_relaxed_barrier, kBlocks, 2, 0, times.as<unsigned long long>());
  std::vector<unsigned long long> t(kBlocks);
  FL_CUDA_CHECK(cudaMemcpy(t.data(), times.get(), kBlocks * 8, cudaMemcpyDeviceToHost));
  for (int c = 0; c < kBlocks; c += 2) {
    EXPECT_GT(t[c], 0u) << "cluster " << c / 2;
    EXPECT_GE(t[c + 1], t[c]) << "cluster " << c / 2 << ": rank 1 passed the barrier "
                              << (t[c] - t[c + 1]) << " ns before rank 0's last thread arrived";
  }
}

// Clusters of kRanks blocks. Each block sets its slots to -1 and its mbarrier up to expect
// kRanks x 512 bytes, then, after a cluster barrier, pushes the 128 floats 1000 blockIdx.x + i
// to every block of its cluster (itself included), into the receiver's slots [rank][i]: 16 bytes
// at a time for i < 64 and 4 for the rest. Rank 0's threads wait about 100 us before they push,
// so a receiver that did not wait for its bytes still reads -1 there. After its wait, thread t
// writes out slot [t % kRanks][t].
__global__ void cluster_push_peers(float* out) {
  __shared__ __align__(16) float slots[kRanks][128];
  __shared__ __align__(8) uint64_t bar_storage;
  const int t = static_cast<int>(threadIdx.x);
  const uint32_t rank = fl::ptx::cluster::ctarank();
  const uint32_t bar = fl::ptx::smem_addr(&bar_storage);
  for (int r = 0; r < kRanks; ++r) slots[r][t] = -1.f;
  if (t == 0) fl::ptx::cluster::expect_bytes(bar, kRanks * 128 * 4);
  __syncthreads();
  fl::ptx::cluster::arrive_relaxed();  // the mbarriers are set up, the slots written
  fl::ptx::cluster::wait();
  if (rank == 0) {
    const uint64_t start = global_ns();
    while (global_ns() - start < 100000) __nanosleep(1000);
  }
  const float v = 1000.f * blockIdx.x + t;
  const uint32_t at = fl::ptx::smem_addr(&slots[rank][t]);
  for (uint32_t to = 0; to < kRanks; ++to) {
    if (t >= 64) {
      fl::ptx::cluster::st_async_f32(fl::ptx::cluster::map(at, to), v,
                                     fl::ptx::cluster::map(bar, to));
    } else if (t % 4 == 0) {
      fl::ptx::cluster::st_async_v4(fl::ptx::cluster::map(at, to),
                                    make_float4(v, v + 1.f, v + 2.f, v + 3.f),
                                    fl::ptx::cluster::map(bar, to));
    }
  }
  fl::ptx::cluster::wait_bytes(bar);
  out[blockIdx.x * 128 + t] = slots[t % kRanks][t];
  fl::ptx::cluster::arrive_relaxed();  // no block leaves before every block has its bytes
  fl::ptx::cluster::wait();
}

// Eight blocks in two clusters of four: every value a block reads is what the block of the
// expected rank in its own cluster pushed, none is the -1 a push that had not landed leaves.
TEST(Cluster, BlocksPushIntoTheSharedMemoryOfTheirCluster) {
  REQUIRE_HOPPER();
  constexpr int kBlocks = 2 * kRanks, kN = kBlocks * 128;
  fl::DeviceBuffer out(kN * 4);
  FL_CUDA_CHECK(cudaMemset(out.get(), 0, kN * 4));
  run_in_clusters(cluster_push_peers, kBlocks, kRanks, 0, out.as<float>());
  std::vector<float> h(kN);
  FL_CUDA_CHECK(cudaMemcpy(h.data(), out.get(), kN * 4, cudaMemcpyDeviceToHost));
  int wrong = 0, unlanded = 0;
  for (int b = 0; b < kBlocks; ++b) {
    for (int t = 0; t < 128; ++t) {
      const int from = b - b % kRanks + t % kRanks;  // the block of rank t % kRanks
      wrong += h[b * 128 + t] != 1000.f * from + t;
      unlanded += h[b * 128 + t] == -1.f;
    }
  }
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(unlanded, 0);
}

// Thread 0 of each block counts the block in, then waits until `expected` blocks have (or about
// 20 ms have passed), and writes whether they all had, and its SM. The launch asks more than
// half an SM's shared memory: one block an SM.
__global__ void cluster_fit_probe(int* counter, int expected, int* all_in, int* sm) {
  if (threadIdx.x != 0) return;
  atomicAdd(counter, 1);
  const uint64_t start = global_ns();
  int seen = 0;
  while ((seen = *reinterpret_cast<volatile int*>(counter)) < expected &&
         global_ns() - start < 20000000) {
    __nanosleep(1000);
  }
  all_in[blockIdx.x] = seen >= expected;
  uint32_t id;
  asm volatile("mov.u32 %0, %%smid;\n" : "=r"(id));
  sm[blockIdx.x] = static_cast<int>(id);
}

// A grid of `blocks` blocks of cluster_fit_probe, launched by launch(counter, expected, all_in,
// sm): how many blocks waited in vain for the others, and on how many distinct SMs they ran.
struct ProbeRun {
  int waited = 0, sms = 0;
};
template <typename Launch>
ProbeRun run_probe(int blocks, Launch launch) {
  fl::DeviceBuffer counter(4), all_in(blocks * 4), sm(blocks * 4);
  FL_CUDA_CHECK(cudaMemset(counter.get(), 0, 4));
  launch(counter.as<int>(), blocks, all_in.as<int>(), sm.as<int>());
  FL_CUDA_CHECK(cudaGetLastError());
  FL_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<int> h_in(blocks), h_sm(blocks);
  FL_CUDA_CHECK(cudaMemcpy(h_in.data(), all_in.get(), blocks * 4, cudaMemcpyDeviceToHost));
  FL_CUDA_CHECK(cudaMemcpy(h_sm.data(), sm.get(), blocks * 4, cudaMemcpyDeviceToHost));
  std::sort(h_sm.begin(), h_sm.end());
  return {blocks - std::accumulate(h_in.begin(), h_in.end(), 0),
          static_cast<int>(std::unique(h_sm.begin(), h_sm.end()) - h_sm.begin())};
}

// For clusters of 2 to 8 blocks: fl::clusters_one_block_an_sm(size) clusters of `size` blocks,
// each block asking more than half an SM, run at once (every block sees every other one arrive,
// each on its own SM); one cluster more does not (some blocks wait in vain: the last cluster runs
// after others end).
TEST(Cluster, TheClustersThatFitOneBlockAnSMRunAtOnce) {
  REQUIRE_HOPPER();
  const int smem = fl::smem_one_block_an_sm();
  ASSERT_GT(smem, 0);
  FL_CUDA_CHECK(cudaFuncSetAttribute(cluster_fit_probe,
                                     cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  for (int size = 2; size <= 8; ++size) {
    const int fit = fl::clusters_one_block_an_sm(size);
    ASSERT_GT(fit, 0) << "clusters of " << size;
    std::cout << "[ fit      ] clusters of " << size << " blocks at once, one block an SM: " << fit
              << "\n";
    for (int clusters : {fit, fit + 1}) {
      const int blocks = clusters * size;
      const ProbeRun r = run_probe(blocks, [&](int* counter, int expected, int* all_in, int* sm) {
        run_in_clusters(cluster_fit_probe, blocks, size, static_cast<size_t>(smem), counter,
                        expected, all_in, sm);
      });
      if (clusters == fit) {
        EXPECT_EQ(r.waited, 0) << fit << " clusters of " << size << " did not all run at once";
        EXPECT_EQ(r.sms, blocks) << "one block an SM";
      } else {
        EXPECT_GT(r.waited, 0) << fit + 1 << " clusters of " << size << " ran at once";
      }
    }
  }
}

// Without clusters: a block that asks fl::smem_one_block_an_sm() runs alone on its SM (an SM
// holds one), so a grid of one block an SM runs at once, each block on an SM of its own, and a
// grid of one block more does not. The decode rungs' 112 KiB at d = 128 leave room for two.
TEST(Cluster, ABlockThatAsksMoreThanHalfAnSMRunsAlone) {
  REQUIRE_HOPPER();
  int device = 0, sms = 0, per_sm = 0;
  FL_CUDA_CHECK(cudaGetDevice(&device));
  FL_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  FL_CUDA_CHECK(
      cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device));
  const int smem = fl::smem_one_block_an_sm();
  ASSERT_GT(smem, per_sm / 2);
  FL_CUDA_CHECK(cudaFuncSetAttribute(cluster_fit_probe,
                                     cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  int held = 0;
  FL_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&held, cluster_fit_probe, 128, smem));
  EXPECT_EQ(held, 1);
  if (per_sm >= 2 * (112 + 1) * 1024) {
    FL_CUDA_CHECK(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&held, cluster_fit_probe, 128, 112 * 1024));
    EXPECT_EQ(held, 2) << "112 KiB";
  }
  for (int blocks : {sms, sms + 1}) {
    const ProbeRun r = run_probe(blocks, [&](int* counter, int expected, int* all_in, int* sm) {
      cluster_fit_probe<<<blocks, 128, smem>>>(counter, expected, all_in, sm);
    });
    if (blocks == sms) {
      EXPECT_EQ(r.waited, 0) << sms << " blocks did not all run at once";
      EXPECT_EQ(r.sms, blocks) << "one an SM";
    } else {
      EXPECT_GT(r.waited, 0) << sms + 1 << " blocks ran at once";
    }
  }
}

}  // namespace
