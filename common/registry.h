// The registry of kernels. Each folder kernels/NN_slug/ defines `const KernelInfo& kernel_NN()`;
// the build generates the list (cmake/kernel_list.cpp.in), so a new folder is a new kernel.
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "common/attention.h"

namespace fl {

// Bad arguments for a kernel: the message names the kernel and the rule it broke.
struct UnsupportedError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// What a rung computes: the forward (O and LSE from Q, K, V) or the backward (dQ, dK, dV).
enum class Op { forward, backward };

struct TileShape {
  int br = 1;  // query rows per thread block (Br)
  int bc = 1;  // keys per KV tile (Bc)
};

struct KernelInfo {
  int number = 0;           // place in the ladder, 0 = cuBLAS baseline
  const char* slug = "";    // folder name without the number, e.g. "naive"
  const char* title = "";   // one line: the idea this rung adds
  const char* doc = "";     // page, e.g. "docs/kernels/01_naive.md"
  int min_sm = 80;          // minimum compute capability * 10
  // Block shape for the tile-model intensity.
  TileShape (*tile)(const AttnParams&) = nullptr;
  // "" when the kernel supports these parameters (beyond check_common), else the broken rule.
  std::string (*supports)(const AttnParams&) = nullptr;
  // Enqueues the kernel on `stream`. Called only after check_common and supports passed.
  void (*launch)(const AttnParams&, cudaStream_t) = nullptr;
  // True for a kernel that stores the scores S in the input dtype before the softmax (the
  // unfused baseline): its low-precision reference rounds S as well (RefPrecision::kLowpScores).
  // Every fused rung keeps S in fp32 and leaves this false.
  bool scores_in_input_dtype = false;
  // Highest compute capability * 10 the kernel runs on; 0 = no limit. The Hopper rungs (17+) are
  // built for sm_90a alone, whose instructions (wgmma, setmaxnreg) no other GPU has: 90.
  int max_sm = 0;
  // The input type the kernel takes: false for fp16 and bf16 (every rung up to 23), true for
  // e4m3 Q, K, V with descale factors (rung 28, which takes nothing else). why_unsupported
  // refuses the other kind by this field.
  bool fp8_inputs = false;
  // Bytes of scratch device memory the kernel needs for a call of these sizes (sizes, causal,
  // dtype, the device's SM count: the pointers of p are not read), for either op: the
  // backward's fp32 dQ accumulator, the split-key decode's partial outputs. Null: none. The
  // caller provides it (AttnParams::workspace for the forward, BwdParams::workspace for the
  // backward), so that nothing allocates inside a call.
  int64_t (*workspace)(const AttnParams&) = nullptr;
  // True for a kernel that takes a K/V cache: per-sequence lengths (AttnParams::seqlens_k) and
  // pages (block_table, page_size): rungs 39 on. why_unsupported refuses a call that sets either for
  // a kernel without it.
  bool kv_cache = false;
  // The backward rungs (29+) set op = Op::backward and the two fields after it (and workspace),
  // and leave tile, supports and launch (the forward's) null.
  Op op = Op::forward;
  // "" when the kernel supports these parameters (beyond check_backward), else the broken rule.
  std::string (*supports_backward)(const BwdParams&) = nullptr;
  // Enqueues the backward on `stream`; called only after every check passed, the workspace
  // included.
  void (*launch_backward)(const BwdParams&, cudaStream_t) = nullptr;

  std::string name() const;  // "01_naive"
};

// Every kernel the build compiled, both ops, sorted by number.
const std::vector<const KernelInfo*>& all_kernels();
// The same, forward rungs only / backward rungs only.
const std::vector<const KernelInfo*>& forward_kernels();
const std::vector<const KernelInfo*>& backward_kernels();

// The kernel with this number or name ("8", "08", "08_double_buffer"); nullptr when absent.
const KernelInfo* find_kernel(const std::string& key);

// "" when `kernel` can run `p` on the current device, else why not (names the kernel and rule):
// check_common, the input type, the K/V cache (seqlens_k or block_table set: a kernel with
// kv_cache only), the kernel's supports, the device, and the workspace size (at least
// workspace_bytes). A backward rung is refused here ("is a backward rung").
std::string why_unsupported(const KernelInfo& kernel, const AttnParams& p);

// The device rule of why_unsupported: "" when the current device's compute capability is in
// [kernel.min_sm, kernel.max_sm] (max_sm 0: no limit), or when no device answers; else the rule.
std::string why_not_this_device(const KernelInfo& kernel);

// The rules of why_unsupported that ask neither the device nor the workspace, in its order:
// check_common, the input type, the K/V cache, the kernel's supports. "" when they hold, else
// the broken rule (without the kernel's name). For answers that depend on the call's sizes
// alone, as the workspace's size (fl_workspace_size).
std::string why_unsupported_by_rules(const KernelInfo& kernel, const AttnParams& p);

// The shared-memory rule of a rung whose block is large, for its supports: "" when a block of
// smem_bytes fits what the current device gives one block (or no device answers: the registry
// reports that, and no CUDA error is left behind), else "needs X KiB of shared memory per block
// at d = D (the device allows Y KiB)".
std::string shared_memory_refusal(int smem_bytes, int head_dim);

// The same for the backward: check_backward, the kernel's op, its supports_backward, the device,
// and the workspace size (at least workspace_bytes). A forward rung is refused.
std::string why_unsupported_backward(const KernelInfo& kernel, const BwdParams& b);

// The workspace `kernel` needs for a call of p's sizes, in its op (0 when it needs none, or when
// p's shape breaks check_shape).
int64_t workspace_bytes(const KernelInfo& kernel, const AttnParams& p);

// The kernel "best" stands for: of the kernels that can run `p` on the current device, the one
// with the highest number. The ladder's order is its order of speed on the sweep (README), so
// that is the fastest one that takes the call: a Hopper rung on an H100 where the call is in its
// contract, rung 16 for the rest of rung 16's. The workspace size is not part of the choice (ask
// workspace_bytes of the kernel this returns). nullptr when no kernel can; `why` (if given) then
// holds every kernel's reason, one an indented line, highest number first.
const KernelInfo* best_kernel(const AttnParams& p, std::string* why = nullptr);

// The same among the backward rungs, with one difference: the Hopper track (compute capability
// 9.0: rungs 33-36) is asked before the mma.sync rungs (29-32, 41-45 and 54-55), each from its
// highest number down, since rungs 41-45 and 54-55 come after the Hopper rungs in number but not
// in speed. The workspace size is not part of the choice (ask workspace_bytes of the kernel this
// returns).
const KernelInfo* best_backward_kernel(const BwdParams& b, std::string* why = nullptr);

// Checks the arguments (throws UnsupportedError naming the kernel and the rule), then launches
// and checks the launch (throws CudaError).
void run_kernel(const KernelInfo& kernel, const AttnParams& p, cudaStream_t stream = nullptr);

// The backward: why_unsupported_backward (throws UnsupportedError), then launch_backward.
void run_backward(const KernelInfo& kernel, const BwdParams& b, cudaStream_t stream = nullptr);

}  // namespace fl
