#include "common/registry.h"

#include <cstdio>
#include <cstdlib>

#include "common/cuda_check.h"

namespace fl {

std::string KernelInfo::name() const {
  char buf[128];
  std::snprintf(buf, sizeof(buf), "%02d_%s", number, slug);
  return buf;
}

const KernelInfo* find_kernel(const std::string& key) {
  for (const KernelInfo* k : all_kernels()) {
    if (key == k->name() || key == k->slug) return k;
    char* end = nullptr;
    const long n = std::strtol(key.c_str(), &end, 10);
    if (!key.empty() && end != nullptr && *end == '\0' && n == k->number) return k;
  }
  return nullptr;
}

std::string why_unsupported(const KernelInfo& kernel, const AttnParams& p) {
  std::string why = check_common(p);
  // The input type, by KernelInfo::fp8_inputs, before the kernel's own rules (which assume it).
  if (why.empty() && p.dtype == DType::e4m3 && !kernel.fp8_inputs) {
    why = "takes fp16 and bf16 inputs (got e4m3): e4m3 inputs need rung 28";
  } else if (why.empty() && p.dtype != DType::e4m3 && kernel.fp8_inputs) {
    why = std::string("takes e4m3 inputs only (got ") + to_string(p.dtype) + ")";
  }
  if (why.empty()) why = kernel.supports(p);
  if (why.empty()) {
    int device = 0, major = 0, minor = 0;
    if (cudaGetDevice(&device) == cudaSuccess &&
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) == cudaSuccess &&
        (major * 10 + minor < kernel.min_sm ||
         (kernel.max_sm != 0 && major * 10 + minor > kernel.max_sm))) {
      const std::string has = " (device has " + std::to_string(major) + "." +
                              std::to_string(minor) + ")";
      if (kernel.max_sm == kernel.min_sm) {
        why = "needs compute capability " + std::to_string(kernel.min_sm / 10) + "." +
              std::to_string(kernel.min_sm % 10) + " exactly: its code is built for sm_" +
              std::to_string(kernel.min_sm) + "a alone (wgmma, TMA, setmaxnreg)" + has;
      } else {
        why = "needs compute capability >= " + std::to_string(kernel.min_sm / 10) + "." +
              std::to_string(kernel.min_sm % 10) + has;
      }
    }
  }
  return why.empty() ? why : "kernel " + kernel.name() + ": " + why;
}

const KernelInfo* best_kernel(const AttnParams& p, std::string* why) {
  std::string reasons;
  const auto& kernels = all_kernels();
  for (auto it = kernels.rbegin(); it != kernels.rend(); ++it) {
    const std::string no = why_unsupported(**it, p);
    if (no.empty()) return *it;
    reasons += "\n  " + no;
  }
  if (why != nullptr) *why = "no kernel of this build supports this call:" + reasons;
  return nullptr;
}

void run_kernel(const KernelInfo& kernel, const AttnParams& p, cudaStream_t stream) {
  const std::string why = why_unsupported(kernel, p);
  if (!why.empty()) throw UnsupportedError(why);
  kernel.launch(p, stream);
  FL_CHECK_LAUNCH();
}

}  // namespace fl
