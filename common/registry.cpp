#include "common/registry.h"

#include <cstdio>
#include <cstdint>
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

std::string why_not_this_device(const KernelInfo& kernel) {
  int device = 0, major = 0, minor = 0;
  if (cudaGetDevice(&device) == cudaSuccess &&
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) == cudaSuccess &&
      (major * 10 + minor < kernel.min_sm ||
       (kernel.max_sm != 0 && major * 10 + minor > kernel.max_sm))) {
    const std::string has =
        " (device has " + std::to_string(major) + "." + std::to_string(minor) + ")";
    if (kernel.max_sm == kernel.min_sm) {
      return "needs compute capability " + std::to_string(kernel.min_sm / 10) + "." +
             std::to_string(kernel.min_sm % 10) + " exactly: its code is built for sm_" +
             std::to_string(kernel.min_sm) + "a alone (wgmma, TMA, setmaxnreg)" + has;
    }
    return "needs compute capability >= " + std::to_string(kernel.min_sm / 10) + "." +
           std::to_string(kernel.min_sm % 10) + has;
  }
  return "";
}

namespace {

// "" when `have` bytes of workspace are enough for `kernel` on p's sizes, else the rule.
std::string why_workspace_short(const KernelInfo& kernel, const AttnParams& p, int64_t have) {
  const int64_t need = kernel.workspace == nullptr ? 0 : kernel.workspace(p);
  if (have >= need) return "";
  return "the workspace holds " + std::to_string(have) + " bytes; this shape needs " +
         std::to_string(need) + " (workspace_bytes)";
}

}  // namespace

std::string why_unsupported(const KernelInfo& kernel, const AttnParams& p) {
  if (kernel.op == Op::backward) {
    return "kernel " + kernel.name() +
           ": is a backward rung (it computes dQ, dK, dV): call it through run_backward";
  }
  std::string why = why_unsupported_by_rules(kernel, p);
  if (why.empty()) why = why_not_this_device(kernel);
  if (why.empty()) why = why_workspace_short(kernel, p, p.workspace_bytes);
  return why.empty() ? why : "kernel " + kernel.name() + ": " + why;
}

std::string why_unsupported_by_rules(const KernelInfo& kernel, const AttnParams& p) {
  std::string why = check_common(p);
  // The input type, by KernelInfo::fp8_inputs, before the kernel's own rules (which assume it).
  if (why.empty() && p.dtype == DType::e4m3 && !kernel.fp8_inputs) {
    why = "takes fp16 and bf16 inputs (got e4m3): e4m3 inputs need rung 28";
  } else if (why.empty() && p.dtype != DType::e4m3 && kernel.fp8_inputs) {
    why = std::string("takes e4m3 inputs only (got ") + to_string(p.dtype) + ")";
  }
  // The K/V cache, by KernelInfo::kv_cache, before the kernel's own rules (which assume a
  // contiguous K/V of seqlen_k keys a sequence when the kernel has no kv_cache).
  if (why.empty() && !kernel.kv_cache && (p.seqlens_k != nullptr || p.block_table != nullptr)) {
    why = "takes a contiguous K/V of seqlen_k keys a sequence: a K/V cache with cache lengths or "
          "a block table needs a rung with a K/V cache (39 on)";
  }
  if (why.empty()) why = kernel.supports(p);
  return why;
}

std::string why_unsupported_backward(const KernelInfo& kernel, const BwdParams& b) {
  if (kernel.op != Op::backward) {
    return "kernel " + kernel.name() +
           ": is a forward rung (it computes O): the backward needs a backward rung";
  }
  std::string why = check_backward(b);
  if (why.empty()) why = kernel.supports_backward(b);
  if (why.empty()) why = why_not_this_device(kernel);
  if (why.empty()) why = why_workspace_short(kernel, b.fwd, b.workspace_bytes);
  return why.empty() ? why : "kernel " + kernel.name() + ": " + why;
}

int64_t workspace_bytes(const KernelInfo& kernel, const AttnParams& p) {
  if (kernel.workspace == nullptr || check_shape(p) != "") return 0;
  return kernel.workspace(p);
}

std::string shared_memory_refusal(int smem_bytes, int head_dim) {
  int device = 0, max_smem = 0;
  if (cudaGetDevice(&device) == cudaSuccess &&
      cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) ==
          cudaSuccess &&
      smem_bytes > max_smem) {
    return "needs " + std::to_string(smem_bytes / 1024) + " KiB of shared memory per block at d = " +
           std::to_string(head_dim) + " (the device allows " + std::to_string(max_smem / 1024) +
           " KiB)";
  }
  cudaGetLastError();  // leave no error behind (no device: the registry reports that)
  return "";
}

const KernelInfo* best_backward_kernel(const BwdParams& b, std::string* why) {
  // The workspace is the caller's to size for the kernel chosen: judge every other rule.
  BwdParams sized = b;
  sized.workspace_bytes = INT64_MAX;
  if (sized.workspace == nullptr) sized.workspace = reinterpret_cast<void*>(256);  // never read
  // Two tracks share the numbers: the Hopper rungs (33-36, compute capability 9.0) are faster
  // than any mma.sync rung where they take a call, the later mma.sync rungs 41-45 and 54-55
  // included, so they are asked first; within a track, the highest number.
  std::string reasons;
  const auto& kernels = backward_kernels();
  for (const bool hopper : {true, false}) {
    for (auto it = kernels.rbegin(); it != kernels.rend(); ++it) {
      if (((*it)->min_sm >= 90) != hopper) continue;
      const std::string no = why_unsupported_backward(**it, sized);
      if (no.empty()) return *it;
      reasons += "\n  " + no;
    }
  }
  if (why != nullptr) *why = "no backward kernel of this build supports this call:" + reasons;
  return nullptr;
}

const KernelInfo* best_kernel(const AttnParams& p, std::string* why) {
  // The workspace is the caller's to size for the kernel chosen: judge every other rule.
  AttnParams sized = p;
  sized.workspace_bytes = INT64_MAX;
  if (sized.workspace == nullptr) sized.workspace = reinterpret_cast<void*>(256);  // never read
  std::string reasons;
  const auto& kernels = forward_kernels();
  for (auto it = kernels.rbegin(); it != kernels.rend(); ++it) {
    const std::string no = why_unsupported(**it, sized);
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

void run_backward(const KernelInfo& kernel, const BwdParams& b, cudaStream_t stream) {
  const std::string why = why_unsupported_backward(kernel, b);
  if (!why.empty()) throw UnsupportedError(why);
  kernel.launch_backward(b, stream);
  FL_CHECK_LAUNCH();
}

}  // namespace fl
