// The C API (tools/fl_api.h) over the kernel registry: translates fl_attention_params into
// fl::AttnParams (fl_backward_params into fl::BwdParams), calls fl::run_kernel (fl::run_backward),
// and turns every exception into a return code and a message.
#include "fl_api.h"

#include <cuda_runtime.h>

#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "common/attention.h"
#include "common/cuda_check.h"
#include "common/registry.h"

namespace {

// Copies msg into buf (NUL-terminated, truncated to len); nothing when buf is null or len is 0.
void write_message(char* buf, size_t len, const std::string& msg) {
  if (buf == nullptr || len == 0) return;
  const size_t n = msg.size() < len - 1 ? msg.size() : len - 1;
  std::memcpy(buf, msg.data(), n);
  buf[n] = '\0';
}

// fl_attention_params -> fl::AttnParams; "" on success, else what is wrong with the struct.
std::string to_params(const fl_attention_params* c, fl::AttnParams* p) {
  if (c == nullptr) return "params is a null pointer";
  if (c->dtype != 0 && c->dtype != 1 && c->dtype != 2) {
    return "dtype must be 0 (fp16), 1 (bf16) or 2 (e4m3), got " + std::to_string(c->dtype);
  }
  if (c->out_dtype != 0 && c->out_dtype != 1) {
    return "out_dtype must be 0 (fp16) or 1 (bf16), got " + std::to_string(c->out_dtype);
  }
  static constexpr fl::DType kTypes[] = {fl::DType::f16, fl::DType::bf16, fl::DType::e4m3};
  p->dtype = kTypes[c->dtype];
  // check_common holds the rest: out_dtype equal to dtype for fp16/bf16 inputs, the descale
  // factors for e4m3 inputs and none for the others.
  p->out_dtype = kTypes[c->out_dtype];
  p->q_descale = c->q_descale;
  p->k_descale = c->k_descale;
  p->v_descale = c->v_descale;
  p->descale_per_head = c->descale_per_head != 0;
  p->batch = c->batch;
  p->heads_q = c->heads_q;
  p->heads_kv = c->heads_kv;
  p->seqlen_q = c->seqlen_q;
  p->seqlen_k = c->seqlen_k;
  p->head_dim = c->head_dim;
  p->causal = c->causal != 0;
  p->softmax_scale = c->softmax_scale;
  p->q = c->q;
  p->k = c->k;
  p->v = c->v;
  p->o = c->o;
  p->lse = c->lse;
  p->q_stride = {c->q_stride_batch, c->q_stride_head, c->q_stride_row, c->q_stride_dim};
  p->k_stride = {c->k_stride_batch, c->k_stride_head, c->k_stride_row, c->k_stride_dim};
  p->v_stride = {c->v_stride_batch, c->v_stride_head, c->v_stride_row, c->v_stride_dim};
  p->o_stride = {c->o_stride_batch, c->o_stride_head, c->o_stride_row, c->o_stride_dim};
  p->workspace = c->workspace;
  p->workspace_bytes = c->workspace_bytes;
  // check_common holds the K/V cache's rules (check_kv_cache), the kernels' registry which rung
  // takes one (KernelInfo::kv_cache).
  p->seqlens_k = c->seqlens_k;
  p->block_table = c->block_table;
  p->block_table_stride = c->block_table_stride;
  p->page_size = c->page_size;
  return "";
}

// fl_backward_params -> fl::BwdParams; "" on success, else what is wrong with the struct.
std::string to_bwd_params(const fl_backward_params* c, fl::BwdParams* b) {
  if (c == nullptr) return "params is a null pointer";
  const std::string bad = to_params(&c->fwd, &b->fwd);
  if (!bad.empty()) return bad;
  b->dout = c->dout;
  b->dq = c->dq;
  b->dk = c->dk;
  b->dv = c->dv;
  b->do_stride = {c->do_stride_batch, c->do_stride_head, c->do_stride_row, c->do_stride_dim};
  b->dq_stride = {c->dq_stride_batch, c->dq_stride_head, c->dq_stride_row, c->dq_stride_dim};
  b->dk_stride = {c->dk_stride_batch, c->dk_stride_head, c->dk_stride_row, c->dk_stride_dim};
  b->dv_stride = {c->dv_stride_batch, c->dv_stride_head, c->dv_stride_row, c->dv_stride_dim};
  b->workspace = c->workspace;
  b->workspace_bytes = c->workspace_bytes;
  return "";
}

// A backward call of p's sizes with contiguous tensors, for the questions about sizes alone
// (fl_backward_workspace_size): every device pointer a stand-in that the checks see as present
// and aligned. Nothing is launched with it, and no check reads device memory.
fl::BwdParams stand_in_backward(const fl::AttnParams& sizes) {
  alignas(256) static unsigned char stand_in[256];
  fl::AttnParams p = sizes;
  const fl::Strides q = fl::make_strides(fl::Layout::BHND, p.heads_q, p.seqlen_q, p.head_dim);
  const fl::Strides kv = fl::make_strides(fl::Layout::BHND, p.heads_kv, p.seqlen_k, p.head_dim);
  p.q_stride = p.o_stride = q;
  p.k_stride = p.v_stride = kv;
  p.q = p.k = p.v = stand_in;
  p.o = stand_in;
  p.lse = reinterpret_cast<float*>(stand_in);
  p.workspace = nullptr;  // the forward's scratch: not the backward's business
  p.workspace_bytes = 0;
  fl::BwdParams b = fl::make_bwd_params(p);
  b.dout = stand_in;
  b.dq = b.dk = b.dv = stand_in;
  b.workspace = stand_in;
  return b;
}

// A forward call of p's sizes with contiguous tensors, for fl_workspace_size: stand_in_backward's
// forward, its LSE only if the caller has one, and the caller's K/V cache fields as they are
// (the pointers too, so that the rules that ask whether a cache is there see it: rungs 39 on
// take one; nothing reads what they point at). With a block table, K and V are contiguous page
// pools [pages, page_size, H_kv, d].
fl::AttnParams stand_in_forward(const fl::AttnParams& p) {
  fl::AttnParams sizes = stand_in_backward(p).fwd;
  if (p.lse == nullptr) sizes.lse = nullptr;
  sizes.seqlens_k = p.seqlens_k;
  sizes.block_table = p.block_table;
  sizes.block_table_stride = p.block_table_stride;
  sizes.page_size = p.page_size;
  if (p.block_table != nullptr) {
    fl::Strides pool;
    pool.row = p.heads_kv * p.head_dim;
    pool.head = p.head_dim;
    pool.batch = p.page_size * pool.row;
    sizes.k_stride = sizes.v_stride = pool;
  }
  return sizes;
}

const fl::KernelInfo* kernel_at(int index) {
  const auto& kernels = fl::all_kernels();
  if (index < 0 || index >= static_cast<int>(kernels.size())) return nullptr;
  return kernels[index];
}

const fl::KernelInfo* kernel_numbered(int number) {
  for (const fl::KernelInfo* k : fl::all_kernels()) {
    if (k->number == number) return k;
  }
  return nullptr;
}

std::string no_such_kernel(int number) {
  std::string built;
  for (const fl::KernelInfo* k : fl::all_kernels()) {
    built += (built.empty() ? "" : ", ") + k->name();
  }
  return "no kernel numbered " + std::to_string(number) + " in this build (built: " + built + ")";
}

}  // namespace

extern "C" {

FL_API size_t fl_params_size(void) { return sizeof(fl_attention_params); }

FL_API void fl_set_contiguous_strides(fl_attention_params* p) {
  if (p == nullptr) return;
  const fl::Strides q = fl::make_strides(fl::Layout::BHND, p->heads_q, p->seqlen_q, p->head_dim);
  const fl::Strides kv = fl::make_strides(fl::Layout::BHND, p->heads_kv, p->seqlen_k, p->head_dim);
  p->q_stride_batch = p->o_stride_batch = q.batch;
  p->q_stride_head = p->o_stride_head = q.head;
  p->q_stride_row = p->o_stride_row = q.row;
  p->k_stride_batch = p->v_stride_batch = kv.batch;
  p->k_stride_head = p->v_stride_head = kv.head;
  p->k_stride_row = p->v_stride_row = kv.row;
  p->q_stride_dim = p->k_stride_dim = p->v_stride_dim = p->o_stride_dim = 1;
}

FL_API int fl_num_kernels(void) { return static_cast<int>(fl::all_kernels().size()); }

FL_API int fl_kernel_number(int index) {
  const fl::KernelInfo* k = kernel_at(index);
  return k != nullptr ? k->number : -1;
}

FL_API const char* fl_kernel_name(int index) {
  // KernelInfo::name() builds a std::string; keep one per kernel so the pointer stays valid.
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const fl::KernelInfo* k : fl::all_kernels()) v.push_back(k->name());
    return v;
  }();
  if (index < 0 || index >= static_cast<int>(names.size())) return nullptr;
  return names[index].c_str();
}

FL_API const char* fl_kernel_title(int index) {
  const fl::KernelInfo* k = kernel_at(index);
  return k != nullptr ? k->title : nullptr;
}

FL_API int fl_kernel_op(int index) {
  const fl::KernelInfo* k = kernel_at(index);
  if (k == nullptr) return -1;
  return k->op == fl::Op::backward ? FL_OP_BACKWARD : FL_OP_FORWARD;
}

FL_API int fl_best_kernel(const fl_attention_params* c, char* why, size_t why_len) {
  write_message(why, why_len, "");
  try {
    fl::AttnParams p;
    std::string reason = to_params(c, &p);
    if (!reason.empty()) {
      write_message(why, why_len, reason);
      return -1;
    }
    const fl::KernelInfo* kernel = fl::best_kernel(p, &reason);
    if (kernel != nullptr) return kernel->number;
    write_message(why, why_len, reason);
  } catch (const std::exception& e) {
    write_message(why, why_len, e.what());
  } catch (...) {
    write_message(why, why_len, "unknown exception");
  }
  return -1;
}

FL_API int fl_supports(int number, const fl_attention_params* c, char* why, size_t why_len) {
  try {
    if (number == FL_KERNEL_BEST) return fl_best_kernel(c, why, why_len) >= 0 ? 1 : 0;
    const fl::KernelInfo* kernel = kernel_numbered(number);
    if (kernel == nullptr) {
      write_message(why, why_len, no_such_kernel(number));
      return 0;
    }
    fl::AttnParams p;
    std::string reason = to_params(c, &p);
    if (reason.empty()) reason = fl::why_unsupported(*kernel, p);
    write_message(why, why_len, reason);
    return reason.empty() ? 1 : 0;
  } catch (const std::exception& e) {
    write_message(why, why_len, e.what());
  } catch (...) {
    write_message(why, why_len, "unknown exception");
  }
  return 0;
}

FL_API int64_t fl_workspace_size(int number, const fl_attention_params* c, char* why,
                                 size_t why_len) {
  write_message(why, why_len, "");
  try {
    fl::AttnParams p;
    std::string reason = to_params(c, &p);
    const fl::KernelInfo* kernel = nullptr;
    // The call on its sizes: contiguous stand-in tensors (the LSE only if the caller has one),
    // the caller's K/V cache fields.
    const fl::AttnParams sizes = stand_in_forward(p);
    if (reason.empty() && number == FL_KERNEL_BEST) {
      kernel = fl::best_kernel(sizes, &reason);
      if (kernel == nullptr && reason.empty()) reason = "no kernel takes this call";
    } else if (reason.empty()) {
      kernel = kernel_numbered(number);
      if (kernel == nullptr) {
        reason = no_such_kernel(number);
      } else if (kernel->op != fl::Op::forward) {
        reason = "kernel " + kernel->name() +
                 ": is a backward rung: its workspace is fl_backward_workspace_size's answer";
      } else {
        // A size for a call the kernel would refuse is no answer (the device is not asked): the
        // rules why_unsupported holds before the device's, in its order and words.
        const std::string rule = fl::why_unsupported_by_rules(*kernel, sizes);
        if (!rule.empty()) reason = "kernel " + kernel->name() + ": " + rule;
      }
    }
    if (!reason.empty()) {
      write_message(why, why_len, reason);
      return -1;
    }
    return fl::workspace_bytes(*kernel, p);
  } catch (const std::exception& e) {
    write_message(why, why_len, e.what());
  } catch (...) {
    write_message(why, why_len, "unknown exception");
  }
  return -1;
}

FL_API int fl_run(int number, const fl_attention_params* c, void* stream, char* err,
                  size_t err_len) {
  write_message(err, err_len, "");
  try {
    if (number == FL_KERNEL_BEST) {
      number = fl_best_kernel(c, err, err_len);
      if (number < 0) return FL_UNSUPPORTED;
    }
    const fl::KernelInfo* kernel = kernel_numbered(number);
    if (kernel == nullptr) {
      write_message(err, err_len, no_such_kernel(number));
      return FL_NO_SUCH_KERNEL;
    }
    fl::AttnParams p;
    const std::string bad = to_params(c, &p);
    if (!bad.empty()) {
      write_message(err, err_len, "kernel " + kernel->name() + ": " + bad);
      return FL_UNSUPPORTED;
    }
    fl::run_kernel(*kernel, p, static_cast<cudaStream_t>(stream));
    return FL_OK;
  } catch (const fl::UnsupportedError& e) {
    write_message(err, err_len, e.what());
    return FL_UNSUPPORTED;
  } catch (const fl::CudaError& e) {
    write_message(err, err_len, e.what());
    return FL_CUDA_ERROR;
  } catch (const std::exception& e) {
    write_message(err, err_len, e.what());
  } catch (...) {
    write_message(err, err_len, "unknown exception");
  }
  return FL_INTERNAL_ERROR;
}

// ------------------------------------------------------------------------------------------------
// The backward
// ------------------------------------------------------------------------------------------------

FL_API size_t fl_backward_params_size(void) { return sizeof(fl_backward_params); }

FL_API void fl_set_contiguous_backward_strides(fl_backward_params* b) {
  if (b == nullptr) return;
  fl_set_contiguous_strides(&b->fwd);
  const fl_attention_params& f = b->fwd;
  b->do_stride_batch = b->dq_stride_batch = f.q_stride_batch;
  b->do_stride_head = b->dq_stride_head = f.q_stride_head;
  b->do_stride_row = b->dq_stride_row = f.q_stride_row;
  b->dk_stride_batch = b->dv_stride_batch = f.k_stride_batch;
  b->dk_stride_head = b->dv_stride_head = f.k_stride_head;
  b->dk_stride_row = b->dv_stride_row = f.k_stride_row;
  b->do_stride_dim = b->dq_stride_dim = b->dk_stride_dim = b->dv_stride_dim = 1;
}

FL_API int fl_best_backward_kernel(const fl_backward_params* c, char* why, size_t why_len) {
  write_message(why, why_len, "");
  try {
    fl::BwdParams b;
    std::string reason = to_bwd_params(c, &b);
    if (!reason.empty()) {
      write_message(why, why_len, reason);
      return -1;
    }
    const fl::KernelInfo* kernel = fl::best_backward_kernel(b, &reason);
    if (kernel != nullptr) return kernel->number;
    write_message(why, why_len, reason);
  } catch (const std::exception& e) {
    write_message(why, why_len, e.what());
  } catch (...) {
    write_message(why, why_len, "unknown exception");
  }
  return -1;
}

FL_API int64_t fl_backward_workspace_size(int number, const fl_attention_params* c, char* why,
                                          size_t why_len) {
  write_message(why, why_len, "");
  try {
    fl::AttnParams p;
    std::string reason = to_params(c, &p);
    const fl::KernelInfo* kernel = nullptr;
    if (number == FL_KERNEL_BEST) {
      // The rung the sizes alone lead to: the best backward rung for contiguous tensors.
      if (reason.empty()) {
        kernel = fl::best_backward_kernel(stand_in_backward(p), &reason);
        if (kernel == nullptr && reason.empty()) reason = "no backward kernel takes this call";
      }
    } else {
      kernel = kernel_numbered(number);
      if (kernel == nullptr) {
        reason = no_such_kernel(number);
      } else if (!reason.empty()) {
        reason = "kernel " + kernel->name() + ": " + reason;
      } else if (kernel->op != fl::Op::backward) {
        reason = "kernel " + kernel->name() +
                 ": is a forward rung (it computes O): only a backward rung has a workspace";
      } else {
        // The rules of the call on its sizes (the device is not asked: the size is the shape's):
        // a size for a call the rung would refuse is no answer.
        const fl::BwdParams b = stand_in_backward(p);
        std::string rule = fl::check_backward(b);
        if (rule.empty()) rule = kernel->supports_backward(b);
        if (!rule.empty()) reason = "kernel " + kernel->name() + ": " + rule;
      }
    }
    if (!reason.empty()) {
      write_message(why, why_len, reason);
      return -1;
    }
    return fl::workspace_bytes(*kernel, p);
  } catch (const std::exception& e) {
    write_message(why, why_len, e.what());
  } catch (...) {
    write_message(why, why_len, "unknown exception");
  }
  return -1;
}

FL_API int fl_supports_backward(int number, const fl_backward_params* c, char* why,
                                size_t why_len) {
  try {
    if (number == FL_KERNEL_BEST) {
      // The best rung for the call, then its whole rule, the workspace's size included.
      number = fl_best_backward_kernel(c, why, why_len);
      if (number < 0) return 0;
    }
    const fl::KernelInfo* kernel = kernel_numbered(number);
    if (kernel == nullptr) {
      write_message(why, why_len, no_such_kernel(number));
      return 0;
    }
    fl::BwdParams b;
    std::string reason = to_bwd_params(c, &b);
    if (!reason.empty()) {
      reason = "kernel " + kernel->name() + ": " + reason;
    } else {
      reason = fl::why_unsupported_backward(*kernel, b);
    }
    write_message(why, why_len, reason);
    return reason.empty() ? 1 : 0;
  } catch (const std::exception& e) {
    write_message(why, why_len, e.what());
  } catch (...) {
    write_message(why, why_len, "unknown exception");
  }
  return 0;
}

FL_API int fl_run_backward(int number, const fl_backward_params* c, void* stream, char* err,
                           size_t err_len) {
  write_message(err, err_len, "");
  try {
    if (number == FL_KERNEL_BEST) {
      number = fl_best_backward_kernel(c, err, err_len);
      if (number < 0) return FL_UNSUPPORTED;
    }
    const fl::KernelInfo* kernel = kernel_numbered(number);
    if (kernel == nullptr) {
      write_message(err, err_len, no_such_kernel(number));
      return FL_NO_SUCH_KERNEL;
    }
    fl::BwdParams b;
    const std::string bad = to_bwd_params(c, &b);
    if (!bad.empty()) {
      write_message(err, err_len, "kernel " + kernel->name() + ": " + bad);
      return FL_UNSUPPORTED;
    }
    fl::run_backward(*kernel, b, static_cast<cudaStream_t>(stream));
    return FL_OK;
  } catch (const fl::UnsupportedError& e) {
    write_message(err, err_len, e.what());
    return FL_UNSUPPORTED;
  } catch (const fl::CudaError& e) {
    write_message(err, err_len, e.what());
    return FL_CUDA_ERROR;
  } catch (const std::exception& e) {
    write_message(err, err_len, e.what());
  } catch (...) {
    write_message(err, err_len, "unknown exception");
  }
  return FL_INTERNAL_ERROR;
}

}  // extern "C"
