// Timing with CUDA events, and an L2 flush between timed repeats so that every repeat reads
// Q, K, V from device memory as a real call would.
#pragma once

#include <cuda_runtime.h>

#include "common/device_buffer.h"

namespace fl {

class EventTimer {
 public:
  EventTimer();
  ~EventTimer();
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  void start(cudaStream_t stream = nullptr);
  // Records the stop event, waits for it, and returns the milliseconds since start().
  float stop_ms(cudaStream_t stream = nullptr);

 private:
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

class L2Flusher {
 public:
  L2Flusher();  // sizes itself to twice the current device's L2
  void flush(cudaStream_t stream = nullptr);

 private:
  DeviceBuffer scratch_;
};

// Name of the current device, e.g. "NVIDIA H100 80GB HBM3".
std::string device_name();

}  // namespace fl
