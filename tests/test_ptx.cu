// Tests of the building blocks under common/ptx/: the instruction wrappers (mma.sync, ldmatrix,
// cp.async) against the hardware, and the layouts (fragment maps, swizzle) on the host.
//
// Host tests run everywhere. GPU tests skip with the reason when there is no usable device (or one
// older than sm_80), and fail when there is one and a single element is wrong: every comparison is
// exact (small integers are exact in fp16, bf16 and fp32; ldmatrix and cp.async move bits).
//
//   test_ptx --gtest_filter='Swizzle*:Fragment*'   # the host part
//   test_ptx --gtest_filter='Mma*:Ldmatrix*:CpAsync*'
#include <gtest/gtest.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "common/cuda_check.h"
#include "common/device_buffer.h"
#include "common/dtype.cuh"
#include "common/ptx/cp_async.cuh"
#include "common/ptx/fragment.cuh"
#include "common/ptx/ldmatrix.cuh"
#include "common/ptx/mma.cuh"
#include "common/ptx/smem.cuh"
#include "common/ptx/swizzle.cuh"

namespace {

using fl::frag::RowCol;

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

// True when a device that runs sm_80 instructions is present; `why` says why not.
bool gpu_ready(std::string* why) {
  if (!fl::gpu_available(why)) return false;
  int device = 0, major = 0;
  FL_CUDA_CHECK(cudaGetDevice(&device));
  FL_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  if (major < 8) {
    *why = "mma.sync.m16n8k16 and cp.async need compute capability >= 8.0 (device has " +
           std::to_string(major) + ".x)";
    return false;
  }
  return true;
}

#define REQUIRE_GPU()                           \
  do {                                          \
    std::string why_;                           \
    if (!gpu_ready(&why_)) GTEST_SKIP() << why_; \
  } while (0)

template <typename T>
fl::DeviceBuffer to_device(const std::vector<T>& host) {
  fl::DeviceBuffer buf(host.size() * sizeof(T));
  FL_CUDA_CHECK(cudaMemcpy(buf.get(), host.data(), buf.bytes(), cudaMemcpyHostToDevice));
  return buf;
}

template <typename T>
std::vector<T> to_host(const fl::DeviceBuffer& buf) {
  std::vector<T> host(buf.bytes() / sizeof(T));
  FL_CUDA_CHECK(cudaMemcpy(host.data(), buf.get(), buf.bytes(), cudaMemcpyDeviceToHost));
  return host;
}

void sync_and_check() {
  FL_CHECK_LAUNCH();
  FL_CUDA_CHECK(cudaDeviceSynchronize());
}

// Shared-memory bank arithmetic. 32 banks of 4 bytes: bank = (byte_offset / 4) % 32. Accesses of
// one phase that touch the same 4-byte word are one broadcast; distinct words in the same bank are
// serialised. Returns the number of wavefronts the phase needs: 1 = conflict-free, 8 = 8-way.
int phase_wavefronts(const std::vector<int>& byte_offsets, int bytes_per_access) {
  std::map<int, std::set<int>> words_per_bank;
  for (int off : byte_offsets) {
    for (int b = 0; b < bytes_per_access; b += 4) {
      const int word = (off + b) / 4;
      words_per_bank[word % 32].insert(word);
    }
  }
  int worst = 0;
  for (const auto& [bank, words] : words_per_bank) worst = std::max(worst, static_cast<int>(words.size()));
  return worst;
}

// ---------------------------------------------------------------------------------------------
// Fragment maps (host): each is a bijection onto its matrix, and they fit together the way the
// kernels rely on.
// ---------------------------------------------------------------------------------------------

// Counts how often each (row, col) of a rows x cols matrix is produced; all must be exactly 1.
void expect_each_element_once(const std::vector<RowCol>& hits, int rows, int cols,
                              const char* what) {
  std::vector<int> count(rows * cols, 0);
  for (const RowCol& rc : hits) {
    ASSERT_TRUE(rc.row >= 0 && rc.row < rows && rc.col >= 0 && rc.col < cols)
        << what << ": (" << rc.row << ", " << rc.col << ") is outside " << rows << "x" << cols;
    ++count[rc.row * cols + rc.col];
  }
  ASSERT_EQ(static_cast<int>(hits.size()), rows * cols) << what;
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      EXPECT_EQ(count[r * cols + c], 1) << what << ": element (" << r << ", " << c << ")";
    }
  }
}

TEST(FragmentMaps, AOperandCoversM16K16Once) {
  std::vector<RowCol> hits;
  for (int lane = 0; lane < 32; ++lane)
    for (int r = 0; r < 4; ++r)
      for (int e = 0; e < 2; ++e) hits.push_back(fl::frag::a_m16k16(lane, r, e));
  expect_each_element_once(hits, 16, 16, "a_m16k16");
}

TEST(FragmentMaps, BOperandCoversK16N8Once) {
  std::vector<RowCol> hits;
  for (int lane = 0; lane < 32; ++lane)
    for (int r = 0; r < 2; ++r)
      for (int e = 0; e < 2; ++e) hits.push_back(fl::frag::b_k16n8(lane, r, e));
  expect_each_element_once(hits, 16, 8, "b_k16n8");
}

TEST(FragmentMaps, AccumulatorCoversM16N8Once) {
  std::vector<RowCol> hits;
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < 4; ++i) hits.push_back(fl::frag::c_m16n8(lane, i));
  expect_each_element_once(hits, 16, 8, "c_m16n8");
}

TEST(FragmentMaps, LdmatrixMapsCoverM8N8OnceAndAreTransposes) {
  std::vector<RowCol> plain, trans;
  for (int lane = 0; lane < 32; ++lane) {
    for (int e = 0; e < 2; ++e) {
      const RowCol p = fl::frag::ldmatrix_m8n8(lane, e), t = fl::frag::ldmatrix_m8n8_trans(lane, e);
      plain.push_back(p);
      trans.push_back(t);
      EXPECT_EQ(t.row, p.col) << "lane " << lane << " half " << e;
      EXPECT_EQ(t.col, p.row) << "lane " << lane << " half " << e;
    }
  }
  expect_each_element_once(plain, 8, 8, "ldmatrix_m8n8");
  expect_each_element_once(trans, 8, 8, "ldmatrix_m8n8_trans");
}

// ldmatrix.x4 over the four 8x8 quadrants of a 16x16 row-major tile, matrix i at
// (8 * (i % 2), 8 * (i / 2)), hands each lane exactly its A fragment (rung 04's Q loads).
TEST(FragmentMaps, LdmatrixX4OfQuadrantsIsTheAFragment) {
  for (int lane = 0; lane < 32; ++lane) {
    for (int r = 0; r < 4; ++r) {
      for (int e = 0; e < 2; ++e) {
        const RowCol a = fl::frag::a_m16k16(lane, r, e), m = fl::frag::ldmatrix_m8n8(lane, e);
        EXPECT_EQ(a.row, m.row + 8 * (r % 2)) << "lane " << lane << " reg " << r << " half " << e;
        EXPECT_EQ(a.col, m.col + 8 * (r / 2)) << "lane " << lane << " reg " << r << " half " << e;
      }
    }
  }
}

// B from an [n][k] row-major tile (K: keys x d) through plain ldmatrix, and from a [k][n]
// row-major tile (V: keys x d) through ldmatrix.trans: register r is the 8x8 block at k = 8r.
TEST(FragmentMaps, LdmatrixGivesTheBFragmentFromKAndTransFromV) {
  for (int lane = 0; lane < 32; ++lane) {
    for (int r = 0; r < 2; ++r) {
      for (int e = 0; e < 2; ++e) {
        const RowCol b = fl::frag::b_k16n8(lane, r, e);  // row = k, col = n
        const RowCol k_tile = fl::frag::ldmatrix_m8n8(lane, e);         // (n, k - 8r)
        const RowCol v_tile = fl::frag::ldmatrix_m8n8_trans(lane, e);   // (k - 8r, n)
        EXPECT_EQ(b.row, k_tile.col + 8 * r);
        EXPECT_EQ(b.col, k_tile.row);
        EXPECT_EQ(b.row, v_tile.row + 8 * r);
        EXPECT_EQ(b.col, v_tile.col);
      }
    }
  }
}

// The accumulators of two adjacent n8 tiles (columns 8j..8j+7, j = r / 2) are, element for
// element, the A fragment of the 16x16 tile they form: P stays in registers (rung 03).
TEST(FragmentMaps, TwoAccumulatorTilesFormAnAFragment) {
  for (int lane = 0; lane < 32; ++lane) {
    for (int r = 0; r < 4; ++r) {
      for (int e = 0; e < 2; ++e) {
        const RowCol a = fl::frag::a_m16k16(lane, r, e);
        const RowCol c = fl::frag::c_m16n8(lane, 2 * (r % 2) + e);
        EXPECT_EQ(a.row, c.row) << "lane " << lane << " reg " << r << " half " << e;
        EXPECT_EQ(a.col, c.col + 8 * (r / 2)) << "lane " << lane << " reg " << r << " half " << e;
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Swizzle (host)
// ---------------------------------------------------------------------------------------------

TEST(Swizzle, ChunkIsABijectionOnEveryRow) {
  for (int chunks : {8, 12, 16, 24}) {
    for (int row = 0; row < 128; ++row) {
      std::vector<int> seen(chunks, 0);
      for (int c = 0; c < chunks; ++c) {
        const int s = fl::swizzle::chunk(row, c, chunks);
        ASSERT_TRUE(s >= 0 && s < chunks) << "row " << row << " chunk " << c << " -> " << s;
        ++seen[s];
      }
      for (int s = 0; s < chunks; ++s) {
        EXPECT_EQ(seen[s], 1) << chunks << " chunks per row, row " << row << ", slot " << s;
      }
    }
  }
}

TEST(Swizzle, OffsetIsABijectionOnTheTileAndKeepsTheElementInItsChunk) {
  for (int row_elems : {64, 96, 128, 192}) {
    const int rows = 64;
    std::vector<int> seen(rows * row_elems, 0);
    for (int r = 0; r < rows; ++r) {
      for (int c = 0; c < row_elems; ++c) {
        const int off = fl::swizzle::offset(r, c, row_elems);
        ASSERT_TRUE(off >= r * row_elems && off < (r + 1) * row_elems)
            << "(" << r << ", " << c << ") leaves its row";
        EXPECT_EQ(off % 8, c % 8) << "(" << r << ", " << c << ")";
        EXPECT_EQ(fl::swizzle::byte_offset(r, c, row_elems), 2 * off);
        ++seen[off];
      }
    }
    for (int i = 0; i < rows * row_elems; ++i) EXPECT_EQ(seen[i], 1) << "offset " << i;
  }
}

TEST(Swizzle, BankCounterSeesBroadcastsAndConflicts) {
  EXPECT_EQ(phase_wavefronts({0, 0, 0, 0}, 4), 1);        // one word: broadcast
  EXPECT_EQ(phase_wavefronts({0, 128}, 4), 2);            // two words, bank 0
  EXPECT_EQ(phase_wavefronts({0, 16, 32, 48, 64, 80, 96, 112}, 16), 1);  // one 128-byte line
  EXPECT_EQ(phase_wavefronts({0, 256, 512}, 16), 3);      // same 4 banks, three lines
}

// One ldmatrix phase: 8 lanes give the addresses of 8 consecutive rows at the same logical
// 16-byte chunk (one 8x8 matrix). x4 is four such phases, one per matrix; .trans reads the same.
std::vector<int> ldmatrix_phase(int first_row, int logical_chunk, int row_elems, bool swizzled) {
  std::vector<int> offsets;
  for (int i = 0; i < 8; ++i) {
    const int r = first_row + i, col = 8 * logical_chunk;
    const int elem = swizzled ? fl::swizzle::offset(r, col, row_elems) : r * row_elems + col;
    offsets.push_back(2 * elem);
  }
  return offsets;
}

TEST(Swizzle, LdmatrixPhasesAreConflictFree) {
  for (int row_elems : {64, 96, 128, 192}) {
    for (int first_row = 0; first_row < 64; ++first_row) {
      for (int c = 0; c < row_elems / 8; ++c) {
        EXPECT_EQ(phase_wavefronts(ldmatrix_phase(first_row, c, row_elems, true), 16), 1)
            << "d=" << row_elems << " rows " << first_row << ".." << first_row + 7 << " chunk "
            << c;
      }
    }
  }
}

// The same pattern without the swizzle is the 8-way conflict the swizzle exists for (4-way in
// rows of 96 elements, which start alternately on a line and half-way through one): if this
// test fails, the bank counter above is not measuring anything.
TEST(Swizzle, UnswizzledLdmatrixPhasesAreEightWayConflicts) {
  for (int row_elems : {64, 96, 128, 192}) {
    for (int first_row = 0; first_row < 64; first_row += 8) {
      for (int c = 0; c < row_elems / 8; ++c) {
        EXPECT_EQ(phase_wavefronts(ldmatrix_phase(first_row, c, row_elems, false), 16),
                  row_elems == 96 ? 4 : 8)
            << "d=" << row_elems << " rows from " << first_row << " chunk " << c;
      }
    }
  }
}

// Row-wise 128-bit copies (cp.async global -> shared, the rung-15 O store): lane l of a warp
// writes logical chunk l % n of row first_row + l / n (n = chunks per row, so a warp covers 4
// rows at d = 64 and 2 at d = 128). A 128-bit access is served in 4 phases of 8 lanes.
TEST(Swizzle, RowWiseCopiesAreConflictFree) {
  for (int row_elems : {64, 96, 128, 192}) {
    const int chunks = row_elems / 8;
    for (int first_row = 0; first_row < 64; ++first_row) {
      for (int phase = 0; phase < 4; ++phase) {
        std::vector<int> offsets;
        for (int l = 8 * phase; l < 8 * phase + 8; ++l) {
          offsets.push_back(fl::swizzle::byte_offset(first_row + l / chunks, 8 * (l % chunks),
                                                     row_elems));
        }
        EXPECT_EQ(phase_wavefronts(offsets, 16), 1)
            << "d=" << row_elems << " first row " << first_row << " phase " << phase;
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// mma.sync.m16n8k16 (GPU): D = A * B + C on one warp, fragments built from the maps.
// ---------------------------------------------------------------------------------------------

// A: 16x16 row-major, B: 16x8 row-major (k, n), C and D: 16x8 row-major, all fp32 holding small
// integers (rounded to T exactly).
template <typename T>
__global__ void mma_kernel(const float* A, const float* B, const float* C, float* D) {
  const int lane = threadIdx.x;
  uint32_t a[4], b[2];
  float c[4], d[4];
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const RowCol lo = fl::frag::a_m16k16(lane, r, 0), hi = fl::frag::a_m16k16(lane, r, 1);
    a[r] = fl::pack2<T>(A[lo.row * 16 + lo.col], A[hi.row * 16 + hi.col]);
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const RowCol lo = fl::frag::b_k16n8(lane, r, 0), hi = fl::frag::b_k16n8(lane, r, 1);
    b[r] = fl::pack2<T>(B[lo.row * 8 + lo.col], B[hi.row * 8 + hi.col]);
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const RowCol rc = fl::frag::c_m16n8(lane, i);
    c[i] = C[rc.row * 8 + rc.col];
  }
  fl::ptx::mma_m16n8k16<T>(d, a, b, c);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const RowCol rc = fl::frag::c_m16n8(lane, i);
    D[rc.row * 8 + rc.col] = d[i];
  }
}

std::vector<float> cpu_mma(const std::vector<float>& A, const std::vector<float>& B,
                           const std::vector<float>& C) {
  std::vector<float> D(16 * 8);
  for (int i = 0; i < 16; ++i) {
    for (int n = 0; n < 8; ++n) {
      double acc = C[i * 8 + n];
      for (int k = 0; k < 16; ++k) acc += static_cast<double>(A[i * 16 + k]) * B[k * 8 + n];
      D[i * 8 + n] = static_cast<float>(acc);
    }
  }
  return D;
}

template <typename T>
void expect_mma_exact(const std::vector<float>& A, const std::vector<float>& B,
                      const std::vector<float>& C, const char* dtype) {
  fl::DeviceBuffer dA = to_device(A), dB = to_device(B), dC = to_device(C);
  fl::DeviceBuffer dD(16 * 8 * sizeof(float));
  FL_CUDA_CHECK(cudaMemset(dD.get(), 0xFF, dD.bytes()));  // NaN: an unwritten D fails
  mma_kernel<T><<<1, 32>>>(dA.as<float>(), dB.as<float>(), dC.as<float>(), dD.as<float>());
  sync_and_check();
  const std::vector<float> got = to_host<float>(dD), want = cpu_mma(A, B, C);
  int wrong = 0;
  for (int i = 0; i < 16 * 8; ++i) {
    if (got[i] != want[i] && ++wrong <= 8) {
      ADD_FAILURE() << dtype << " D(" << i / 8 << ", " << i % 8 << ") = " << got[i]
                    << ", expected " << want[i];
    }
  }
  EXPECT_EQ(wrong, 0) << dtype << ": " << wrong << " of 128 outputs wrong";
}

// B = column selector: D(i, n) = A(i, 2n + 1). A wrong A or B map shows up as a wrong column.
TEST(Mma, SelectorBPicksColumnsOfA) {
  REQUIRE_GPU();
  std::vector<float> A(16 * 16), B(16 * 8, 0.f), C(16 * 8, 0.f);
  for (int i = 0; i < 16; ++i)
    for (int k = 0; k < 16; ++k) A[i * 16 + k] = static_cast<float>((i * 16 + k) % 29 - 14);
  for (int n = 0; n < 8; ++n) B[(2 * n + 1) * 8 + n] = 1.f;
  expect_mma_exact<__half>(A, B, C, "fp16");
  expect_mma_exact<__nv_bfloat16>(A, B, C, "bf16");
}

// Random-sign integers in A, B and C: any transposition or swap of fragment elements changes the
// result (the host check below proves it does for this data).
TEST(Mma, RandomSignIntegersMatchCpuExactly) {
  REQUIRE_GPU();
  std::mt19937 rng(20240611);
  std::uniform_int_distribution<int> small(-8, 8), acc(-64, 64);
  std::vector<float> A(16 * 16), B(16 * 8), C(16 * 8);
  for (float& x : A) x = static_cast<float>(small(rng));
  for (float& x : B) x = static_cast<float>(small(rng));
  for (float& x : C) x = static_cast<float>(acc(rng));
  // |D| <= 16 * 64 + 64: exact in fp32; the inputs are exact in fp16 and bf16.
  expect_mma_exact<__half>(A, B, C, "fp16");
  expect_mma_exact<__nv_bfloat16>(A, B, C, "bf16");
}

TEST(Mma, RandomDataDistinguishesATransposed) {
  std::mt19937 rng(20240611);
  std::uniform_int_distribution<int> small(-8, 8), acc(-64, 64);
  std::vector<float> A(16 * 16), At(16 * 16), B(16 * 8), C(16 * 8);
  for (float& x : A) x = static_cast<float>(small(rng));
  for (float& x : B) x = static_cast<float>(small(rng));
  for (float& x : C) x = static_cast<float>(acc(rng));
  for (int i = 0; i < 16; ++i)
    for (int k = 0; k < 16; ++k) At[i * 16 + k] = A[k * 16 + i];
  EXPECT_NE(cpu_mma(A, B, C), cpu_mma(At, B, C));
}

// ---------------------------------------------------------------------------------------------
// ldmatrix (GPU): x4, x2, x4.trans, x2.trans; register i of each lane checked against the maps.
// ---------------------------------------------------------------------------------------------

constexpr int kTileRows = 32;
constexpr int kMaxRowElems = 128;

struct Origins {
  int row[4], col[4];  // top-left (logical) element of matrix i
};

// The tile arrives in its shared-memory (physical) order; lane l gives the address of row l % 8
// of matrix (l / 8) % kNum, through the swizzle when `swizzled`.
template <int kNum, bool kTrans>
__global__ void ldmatrix_kernel(const uint16_t* tile, int row_elems, bool swizzled, Origins o,
                                uint32_t* out) {
  __shared__ __align__(128) uint16_t sTile[kTileRows * kMaxRowElems];
  for (int i = threadIdx.x; i < kTileRows * row_elems; i += blockDim.x) sTile[i] = tile[i];
  __syncthreads();
  const int lane = threadIdx.x;
  const int m = (lane / 8) % kNum;
  const int row = o.row[m] + lane % 8, col = o.col[m];
  const int elem = swizzled ? fl::swizzle::offset(row, col, row_elems) : row * row_elems + col;
  const uint32_t addr = fl::ptx::smem_addr(&sTile[elem]);
  uint32_t r[kNum];
  if constexpr (kNum == 4) {
    if constexpr (kTrans) {
      fl::ptx::ldmatrix_x4_trans(r, addr);
    } else {
      fl::ptx::ldmatrix_x4(r, addr);
    }
  } else {
    if constexpr (kTrans) {
      fl::ptx::ldmatrix_x2_trans(r, addr);
    } else {
      fl::ptx::ldmatrix_x2(r, addr);
    }
  }
#pragma unroll
  for (int i = 0; i < kNum; ++i) out[lane * kNum + i] = r[i];
}

// Logical element (r, c) holds the value r * row_elems + c (a raw 16-bit pattern: ldmatrix moves
// bits, so there is nothing to round).
template <int kNum, bool kTrans>
void expect_ldmatrix(int row_elems, bool swizzled, const Origins& o) {
  std::vector<uint16_t> tile(kTileRows * row_elems);
  for (int r = 0; r < kTileRows; ++r) {
    for (int c = 0; c < row_elems; ++c) {
      const int at = swizzled ? fl::swizzle::offset(r, c, row_elems) : r * row_elems + c;
      tile[at] = static_cast<uint16_t>(r * row_elems + c);
    }
  }
  fl::DeviceBuffer dTile = to_device(tile), dOut(32 * kNum * sizeof(uint32_t));
  FL_CUDA_CHECK(cudaMemset(dOut.get(), 0xFF, dOut.bytes()));
  ldmatrix_kernel<kNum, kTrans><<<1, 32>>>(dTile.as<uint16_t>(), row_elems, swizzled, o,
                                           dOut.as<uint32_t>());
  sync_and_check();
  const std::vector<uint32_t> out = to_host<uint32_t>(dOut);
  int wrong = 0;
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < kNum; ++i) {
      for (int e = 0; e < 2; ++e) {
        const RowCol rc = kTrans ? fl::frag::ldmatrix_m8n8_trans(lane, e)
                                 : fl::frag::ldmatrix_m8n8(lane, e);
        const int want = (o.row[i] + rc.row) * row_elems + o.col[i] + rc.col;
        const int got = static_cast<int>((out[lane * kNum + i] >> (16 * e)) & 0xFFFFu);
        if (got != want && ++wrong <= 8) {
          ADD_FAILURE() << "x" << kNum << (kTrans ? ".trans" : "") << (swizzled ? " swizzled" : "")
                        << ": lane " << lane << " reg " << i << " half " << e << " holds element ("
                        << got / row_elems << ", " << got % row_elems << "), expected ("
                        << want / row_elems << ", " << want % row_elems << ")";
        }
      }
    }
  }
  EXPECT_EQ(wrong, 0) << wrong << " of " << 64 * kNum << " halves wrong";
}

// Matrices at irregular places so that a swapped register or matrix is visible.
constexpr Origins kOrigins = {{0, 8, 16, 21}, {0, 8, 24, 56}};

TEST(Ldmatrix, X4) {
  REQUIRE_GPU();
  expect_ldmatrix<4, false>(64, false, kOrigins);
}

TEST(Ldmatrix, X2) {
  REQUIRE_GPU();
  expect_ldmatrix<2, false>(64, false, kOrigins);
}

TEST(Ldmatrix, X4Trans) {
  REQUIRE_GPU();
  expect_ldmatrix<4, true>(64, false, kOrigins);
}

TEST(Ldmatrix, X2Trans) {
  REQUIRE_GPU();
  expect_ldmatrix<2, true>(64, false, kOrigins);
}

// Through the swizzle (d = 64 and 128 rows): the fragments are the logical ones.
TEST(Ldmatrix, FromSwizzledTilesGivesTheLogicalFragments) {
  REQUIRE_GPU();
  const Origins wide = {{0, 8, 16, 21}, {0, 40, 72, 120}};
  expect_ldmatrix<4, false>(64, true, kOrigins);
  expect_ldmatrix<4, true>(64, true, kOrigins);
  expect_ldmatrix<4, false>(128, true, wide);
  expect_ldmatrix<4, true>(128, true, wide);
}

// ---------------------------------------------------------------------------------------------
// cp.async (GPU)
// ---------------------------------------------------------------------------------------------

constexpr uint8_t kStale = 0xAB;  // what shared memory holds before the copies

// Lane l copies global bytes [16 l, 16 l + 16) three times: with src_bytes 16, 8 and 0.
__global__ void cp_async_zero_fill_kernel(const uint8_t* src, uint8_t* out) {
  __shared__ __align__(16) uint8_t sBuf[3][32][16];
  const int lane = threadIdx.x;
  for (int i = lane; i < 3 * 32 * 16; i += 32) (&sBuf[0][0][0])[i] = kStale;
  __syncthreads();
  const unsigned src_bytes[3] = {16, 8, 0};
  for (int k = 0; k < 3; ++k) {
    fl::ptx::cp_async::copy_16(fl::ptx::smem_addr(sBuf[k][lane]), src + 16 * lane, src_bytes[k]);
  }
  fl::ptx::cp_async::commit_group();
  fl::ptx::cp_async::wait_group<0>();
  __syncthreads();
  for (int i = lane; i < 3 * 32 * 16; i += 32) out[i] = (&sBuf[0][0][0])[i];
}

std::vector<uint8_t> nonzero_bytes(int n, int salt) {
  std::vector<uint8_t> v(n);
  for (int i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(1 + (i * 37 + salt) % 250);  // never 0
  return v;
}

TEST(CpAsync, SrcBytesCopiesThatManyAndZeroFillsTheRest) {
  REQUIRE_GPU();
  const std::vector<uint8_t> src = nonzero_bytes(32 * 16, 0);
  fl::DeviceBuffer dSrc = to_device(src), dOut(3 * 32 * 16);
  cp_async_zero_fill_kernel<<<1, 32>>>(dSrc.as<uint8_t>(), dOut.as<uint8_t>());
  sync_and_check();
  const std::vector<uint8_t> out = to_host<uint8_t>(dOut);
  const int src_bytes[3] = {16, 8, 0};
  int wrong = 0;
  for (int k = 0; k < 3; ++k) {
    for (int lane = 0; lane < 32; ++lane) {
      for (int b = 0; b < 16; ++b) {
        const int want = b < src_bytes[k] ? src[16 * lane + b] : 0;
        const int got = out[(k * 32 + lane) * 16 + b];
        if (got != want && ++wrong <= 8) {
          ADD_FAILURE() << "src_bytes=" << src_bytes[k] << " lane " << lane << " byte " << b
                        << ": got 0x" << std::hex << got << ", expected 0x" << want
                        << (got == kStale ? " (never written)" : "");
        }
      }
    }
  }
  EXPECT_EQ(wrong, 0);
}

// Two commit groups: wait_group<1> must leave the first group complete (the second may still be
// in flight), wait_group<0> both. Each lane reads back only its own copies (cp.async.wait_group
// makes them visible to the issuing thread; other threads would need a barrier).
__global__ void cp_async_groups_kernel(const uint8_t* srcA, const uint8_t* srcB, uint8_t* seenA,
                                       uint8_t* seenB) {
  __shared__ __align__(16) uint8_t sA[32][64];  // group 0: four 16-byte copies per lane
  __shared__ __align__(16) uint8_t sB[32][16];  // group 1: one copy per lane
  const int lane = threadIdx.x;
  for (int b = 0; b < 64; ++b) sA[lane][b] = 0;
  for (int b = 0; b < 16; ++b) sB[lane][b] = 0;
  __syncthreads();
  for (int c = 0; c < 4; ++c) {
    fl::ptx::cp_async::copy_16(fl::ptx::smem_addr(&sA[lane][16 * c]), srcA + 64 * lane + 16 * c);
  }
  fl::ptx::cp_async::commit_group();
  fl::ptx::cp_async::copy_16(fl::ptx::smem_addr(sB[lane]), srcB + 16 * lane);
  fl::ptx::cp_async::commit_group();

  fl::ptx::cp_async::wait_group<1>();  // group 0 has landed
  for (int b = 0; b < 64; ++b) seenA[64 * lane + b] = sA[lane][b];
  fl::ptx::cp_async::wait_group<0>();  // and group 1
  for (int b = 0; b < 16; ++b) seenB[16 * lane + b] = sB[lane][b];
}

TEST(CpAsync, WaitGroupCompletesOlderGroupsFirst) {
  REQUIRE_GPU();
  const std::vector<uint8_t> srcA = nonzero_bytes(32 * 64, 3), srcB = nonzero_bytes(32 * 16, 101);
  fl::DeviceBuffer dA = to_device(srcA), dB = to_device(srcB);
  fl::DeviceBuffer dSeenA(srcA.size()), dSeenB(srcB.size());
  cp_async_groups_kernel<<<1, 32>>>(dA.as<uint8_t>(), dB.as<uint8_t>(), dSeenA.as<uint8_t>(),
                                    dSeenB.as<uint8_t>());
  sync_and_check();
  const std::vector<uint8_t> seenA = to_host<uint8_t>(dSeenA), seenB = to_host<uint8_t>(dSeenB);
  int wrongA = 0, wrongB = 0;
  for (size_t i = 0; i < srcA.size(); ++i) wrongA += seenA[i] != srcA[i];
  for (size_t i = 0; i < srcB.size(); ++i) wrongB += seenB[i] != srcB[i];
  EXPECT_EQ(wrongA, 0) << "bytes of group 0 not yet in shared memory after wait_group<1>";
  EXPECT_EQ(wrongB, 0) << "bytes of group 1 not yet in shared memory after wait_group<0>";
}

// ---------------------------------------------------------------------------------------------
// %dynamic_smem_size: the dynamic shared memory of the launch, the same in every block.
// ---------------------------------------------------------------------------------------------

__global__ void dynamic_smem_kernel(uint32_t* out) {
  extern __shared__ uint8_t sDyn[];
  sDyn[threadIdx.x] = 1;  // the memory is there
  if (threadIdx.x == 0) out[blockIdx.x] = fl::ptx::dynamic_smem_size();
}

TEST(DynamicSmem, EveryBlockReadsItsLaunchsSize) {
  REQUIRE_GPU();
  // 0 bytes would leave sDyn without room for its stores: the smallest launch asks 32.
  const uint32_t sizes[] = {32, 1000, 48 * 1024, 100 * 1024 + 16};
  FL_CUDA_CHECK(cudaFuncSetAttribute(dynamic_smem_kernel,
                                     cudaFuncAttributeMaxDynamicSharedMemorySize, 100 * 1024 + 16));
  for (uint32_t size : sizes) {
    fl::DeviceBuffer dOut(3 * sizeof(uint32_t));
    FL_CUDA_CHECK(cudaMemset(dOut.get(), 0xFF, dOut.bytes()));
    dynamic_smem_kernel<<<3, 32, size>>>(dOut.as<uint32_t>());
    sync_and_check();
    const std::vector<uint32_t> out = to_host<uint32_t>(dOut);
    for (int b = 0; b < 3; ++b) EXPECT_EQ(out[b], size) << "block " << b;
  }
}

}  // namespace
