// The ceiling of the Hopper rungs: wgmma issued back to back from shared memory, nothing else.
//
//   ./build/wgmma_ceiling --benchmark_out=ceiling.json --benchmark_out_format=json
//
// Every SM runs one block of two warpgroups (the shape of rungs 17-19's consumers). Each
// warpgroup issues m64nNk16 SS wgmma (A: 64 x 64 and B: N x 64, K-major, 128-byte swizzle, the
// layout of Q and K in the rungs) four k-steps at a time, one commit group per four, with at most
// two groups in flight (wait_group 1), for `iters` rounds, and stores its accumulator once at the
// end so that nothing is optimised away. The operands are loaded once and reused: this measures
// the tensor cores and the issue of wgmma, not memory. TFLOPS = 2 x 64 x N x 16 x 4 x iters x
// warpgroups x blocks / time. The attention rungs' pages quote their TFLOP/s as a fraction of it.
#include <benchmark/benchmark.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "common/cuda_check.h"
#include "common/device_buffer.h"
#include "common/ptx/fence_proxy.cuh"
#include "common/ptx/gmma_desc.cuh"
#include "common/ptx/smem.cuh"
#include "common/ptx/wgmma.cuh"
#include "common/timing.h"

namespace {

namespace gmma = fl::ptx::gmma;
constexpr int kWarpgroups = 2;
constexpr int kK = 64;  // k of the shared tiles: 4 k-steps of 16

template <typename T, int N>
__global__ void __launch_bounds__(128 * kWarpgroups, 1) ceiling_kernel(int iters, float* out) {
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = smem_raw + ((1024 - fl::ptx::smem_addr(smem_raw) % 1024) % 1024);
  // Operand bits: small values, the same for every run (the speed does not depend on them).
  for (int i = threadIdx.x; i < (64 * kWarpgroups + N) * kK; i += blockDim.x) {
    reinterpret_cast<uint16_t*>(smem)[i] = static_cast<uint16_t>(0x3C00 ^ (i & 0x7));
  }
  fl::ptx::fence_proxy_async_shared();
  __syncthreads();
  const int wg = threadIdx.x / 128;
  const uint32_t base = fl::ptx::smem_addr(smem);
  const uint64_t desc_a = gmma::kmajor_sw128(base + wg * 64 * 128);
  const uint64_t desc_b = gmma::kmajor_sw128(base + kWarpgroups * 64 * 128);
  float d[N / 2];
  fl::ptx::wgmma::fence();
#pragma unroll
  for (int s = 0; s < kK / 16; ++s) {
    fl::ptx::wgmma::Wgmma<T, N>::template ss<0>(d, gmma::advance(desc_a, 32 * s),
                                                gmma::advance(desc_b, 32 * s), s > 0);
  }
  fl::ptx::wgmma::commit_group();
  for (int it = 1; it < iters; ++it) {
    fl::ptx::wgmma::fence();  // d is still being written by the group in flight
#pragma unroll
    for (int s = 0; s < kK / 16; ++s) {
      fl::ptx::wgmma::Wgmma<T, N>::template ss<0>(d, gmma::advance(desc_a, 32 * s),
                                                  gmma::advance(desc_b, 32 * s), 1);
    }
    fl::ptx::wgmma::commit_group();
    fl::ptx::wgmma::wait_group<1>();
  }
  fl::ptx::wgmma::wait_group<0>();
  fl::ptx::wgmma::fence_operands(d);
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < N / 2; ++i) sum += d[i];
  out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}

template <typename T, int N>
void BM_WgmmaCeiling(benchmark::State& state) {
  std::string why;
  if (!fl::gpu_available(&why)) {
    state.SkipWithError(("needs a GPU: " + why).c_str());
    return;
  }
  int device = 0, major = 0, minor = 0, sms = 0;
  FL_CUDA_CHECK(cudaGetDevice(&device));
  FL_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  FL_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  FL_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  if (major != 9 || minor != 0) {
    state.SkipWithError("wgmma is sm_90a: needs compute capability 9.0");
    return;
  }
  const int iters = static_cast<int>(state.range(0));
  const int smem = (64 * kWarpgroups + N) * kK * 2 + 1024;
  FL_CUDA_CHECK(cudaFuncSetAttribute(ceiling_kernel<T, N>,
                                     cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  fl::DeviceBuffer out(static_cast<size_t>(sms) * 128 * kWarpgroups * 4);
  auto launch = [&] {
    ceiling_kernel<T, N><<<sms, 128 * kWarpgroups, smem>>>(iters, static_cast<float*>(out.get()));
    FL_CHECK_LAUNCH();
  };
  for (int w = 0; w < 3; ++w) launch();
  FL_CUDA_CHECK(cudaDeviceSynchronize());
  const double flops = 2.0 * 64 * N * 16 * (kK / 16) * static_cast<double>(iters) * kWarpgroups *
                       sms;
  double total_s = 0;
  int64_t runs = 0;
  fl::EventTimer timer;
  for (auto _ : state) {
    timer.start();
    launch();
    const double s = timer.stop_ms() / 1e3;
    state.SetIterationTime(s);
    total_s += s;
    ++runs;
  }
  state.counters["TFLOPS"] = flops * static_cast<double>(runs) / total_s / 1e12;
  state.counters["N"] = N;
  state.counters["SMs"] = sms;
}

constexpr int64_t kIters = 20000;
BENCHMARK(BM_WgmmaCeiling<__half, 128>)->Name("wgmma_ss_fp16_m64n128k16")->Arg(kIters)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_WgmmaCeiling<__half, 256>)->Name("wgmma_ss_fp16_m64n256k16")->Arg(kIters)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_WgmmaCeiling<__nv_bfloat16, 128>)->Name("wgmma_ss_bf16_m64n128k16")->Arg(kIters)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_WgmmaCeiling<__nv_bfloat16, 256>)->Name("wgmma_ss_bf16_m64n256k16")->Arg(kIters)->UseManualTime()->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
