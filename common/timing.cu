#include <string>

#include "common/cuda_check.h"
#include "common/timing.h"

namespace fl {

EventTimer::EventTimer() {
  FL_CUDA_CHECK(cudaEventCreate(&start_));
  FL_CUDA_CHECK(cudaEventCreate(&stop_));
}
EventTimer::~EventTimer() {
  cudaEventDestroy(start_);
  cudaEventDestroy(stop_);
}
void EventTimer::start(cudaStream_t stream) { FL_CUDA_CHECK(cudaEventRecord(start_, stream)); }
float EventTimer::stop_ms(cudaStream_t stream) {
  FL_CUDA_CHECK(cudaEventRecord(stop_, stream));
  FL_CUDA_CHECK(cudaEventSynchronize(stop_));
  float ms = 0.f;
  FL_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
  return ms;
}

L2Flusher::L2Flusher() {
  int device = 0, l2 = 0;
  FL_CUDA_CHECK(cudaGetDevice(&device));
  FL_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
  scratch_.resize(static_cast<size_t>(l2) * 2);
}
void L2Flusher::flush(cudaStream_t stream) {
  FL_CUDA_CHECK(cudaMemsetAsync(scratch_.get(), 0, scratch_.bytes(), stream));
}

std::string device_name() {
  int device = 0;
  cudaDeviceProp prop{};
  FL_CUDA_CHECK(cudaGetDevice(&device));
  FL_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  return prop.name;
}

}  // namespace fl
