// Error checks for every CUDA runtime and cuBLAS call, and after every kernel launch.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace fl {

// Thrown for CUDA/cuBLAS failures (a broken GPU state, not bad arguments).
struct CudaError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline void cuda_check(cudaError_t e, const char* what, const char* file, int line) {
  if (e != cudaSuccess) {
    throw CudaError(std::string(file) + ":" + std::to_string(line) + ": " + what + ": " +
                    cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
  }
}

inline void cublas_check(cublasStatus_t s, const char* what, const char* file, int line) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    throw CudaError(std::string(file) + ":" + std::to_string(line) + ": " + what +
                    ": cuBLAS status " + std::to_string(static_cast<int>(s)));
  }
}

// True when a CUDA device can be used here; `why` gets the reason when not.
inline bool gpu_available(std::string* why = nullptr) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    if (why != nullptr) {
      *why = e != cudaSuccess ? std::string("no usable CUDA device: ") + cudaGetErrorString(e)
                              : std::string("no CUDA device");
    }
    cudaGetLastError();  // leave no error behind for the next runtime call
    return false;
  }
  return true;
}

}  // namespace fl

#define FL_CUDA_CHECK(expr) ::fl::cuda_check((expr), #expr, __FILE__, __LINE__)
#define FL_CUBLAS_CHECK(expr) ::fl::cublas_check((expr), #expr, __FILE__, __LINE__)
// After a <<<...>>> launch: reports launch-configuration errors at once.
#define FL_CHECK_LAUNCH() ::fl::cuda_check(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)
