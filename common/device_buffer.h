// RAII device memory.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#include "common/cuda_check.h"

namespace fl {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) { resize(bytes); }
  ~DeviceBuffer() { release(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)),
                                            bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      release();
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }

  void resize(size_t bytes) {
    if (bytes == bytes_) return;
    release();
    if (bytes > 0) FL_CUDA_CHECK(cudaMalloc(&ptr_, bytes));
    bytes_ = bytes;
  }
  void* get() const { return ptr_; }
  template <typename T>
  T* as() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  void release() {
    if (ptr_ != nullptr) cudaFree(ptr_);
    ptr_ = nullptr;
    bytes_ = 0;
  }
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace fl
