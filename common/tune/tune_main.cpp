// tune_NN: verifies and times every candidate config of rung NN (kernels/NN_*/tune_candidates.h;
// NN = 12, or 16 which is tuned again) on the current GPU and writes one JSON object per line.
// Built with -DFL_AUTOTUNE=ON (-DFL_AUTOTUNE_RUNGS="12;16"); scripts/autotune.py builds it, runs
// it, and turns its output into kernels/NN_*/tuned_configs.h.
//
//   ./build-tune/tune_12 --out rows.jsonl                       every candidate, fp16 and bf16
//   ./build-tune/tune_12 --out rows.jsonl --d 128 --dtype fp16 --candidates 3,4 --n 4096
//
// For each head dim d and dtype, and each candidate of that d:
//   1. its resources: registers and local memory (spills) from cudaFuncGetAttributes, resident
//      blocks per SM from the occupancy API;
//   2. fl::verify (the ladder's checks: pass rule against the fp32 cuBLAS reference, finite, not
//      all zero, LSE, two runs bitwise equal) on a GQA problem with LSE and a caller scale, and on
//      every timed shape;
//   3. the time of each shape (B x H x N x N x d, default B = H = 16, N = 1024 and 4096): warm-up,
//      then the median of repeats with the L2 flushed before each (fl::EventTimer, fl::L2Flusher),
//      and the output checked again after timing;
//   4. score = geometric mean of the TFLOP/s over the shapes (0 when a check failed).
// Output lines: {"event": "start", ...} before a candidate runs (so that a crash can be pinned
// on it), then {"event": "row", ...} with everything above. A CUDA error that poisons the
// context (an illegal address, say) ends the process with exit status 3 after the "start" line;
// scripts/autotune.py then runs it again without that candidate.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "common/cuda_check.h"
#include "common/harness.h"
#include "common/registry.h"
#include "common/timing.h"
#include "common/tune/tune.h"
#include FL_TUNE_CANDIDATES_H  // the tuned rung's list (a compile definition of tune_NN)

namespace fl::k12_autotune::tune {
#define FL_TUNE_DECLARE(i, d, br, bc, warps, stages, load) const Candidate& candidate_##i();
FL_TUNE_CANDIDATES(FL_TUNE_DECLARE)
#undef FL_TUNE_DECLARE
}  // namespace fl::k12_autotune::tune

// tune_12 links the harness without the ladder: its registry is empty (the candidates are run
// directly), which is all registry.cpp needs.
namespace fl {
const std::vector<const KernelInfo*>& all_kernels() {
  static const std::vector<const KernelInfo*> none;
  return none;
}
const std::vector<const KernelInfo*>& forward_kernels() { return all_kernels(); }
const std::vector<const KernelInfo*>& backward_kernels() { return all_kernels(); }
}  // namespace fl

namespace {

#define FL_TUNE_STR2(x) #x
#define FL_TUNE_STR(x) FL_TUNE_STR2(x)
constexpr const char* kName = "tune_" FL_TUNE_STR(FL_TUNE_RUNG);  // tune_12, tune_16

using fl::k12_autotune::tune::Candidate;

std::vector<const Candidate*> all_candidates() {
  using namespace fl::k12_autotune::tune;
  return {
#define FL_TUNE_CALL(i, d, br, bc, warps, stages, load) &candidate_##i(),
      FL_TUNE_CANDIDATES(FL_TUNE_CALL)
#undef FL_TUNE_CALL
  };
}

std::vector<int64_t> parse_list(const char* s) {
  std::vector<int64_t> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(std::strtoll(item.c_str(), nullptr, 10));
  }
  return out;
}

struct Options {
  std::string out;
  std::vector<int64_t> d = {64, 128};
  std::vector<fl::DType> dtypes = {fl::DType::f16, fl::DType::bf16};
  std::vector<int64_t> n = {1024, 4096};
  std::vector<int64_t> candidates;  // empty = all
  int64_t batch = 16, heads = 16;
  int warmup = 3, repeats = 20;
};

std::string json_str(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      o += ' ';
    } else {
      o += c;
    }
  }
  return o + "\"";
}

std::string num(double x) {
  if (!std::isfinite(x)) return "null";
  char b[64];
  std::snprintf(b, sizeof(b), "%.6g", x);
  return b;
}

class Writer {
 public:
  explicit Writer(const std::string& path)
      : f_(path.empty() ? stdout : std::fopen(path.c_str(), "a")) {
    if (f_ == nullptr) throw std::runtime_error("cannot open " + path);
  }
  void line(const std::string& s) {
    std::fprintf(f_, "%s\n", s.c_str());
    std::fflush(f_);
  }

 private:
  FILE* f_;
};

// One timed shape with its inputs and references, built once per (d, dtype).
struct Shape {
  fl::ProblemSpec spec;
  std::unique_ptr<fl::Problem> problem;
  std::unique_ptr<fl::Reference> reference;
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto need = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s: %s needs a value\n", kName, a.c_str());
        std::exit(1);
      }
      return argv[++i];
    };
    if (a == "--out") {
      o.out = need();
    } else if (a == "--d") {
      o.d = parse_list(need());
    } else if (a == "--n") {
      o.n = parse_list(need());
    } else if (a == "--candidates") {
      o.candidates = parse_list(need());
    } else if (a == "--batch") {
      o.batch = std::strtoll(need(), nullptr, 10);
    } else if (a == "--heads") {
      o.heads = std::strtoll(need(), nullptr, 10);
    } else if (a == "--warmup") {
      o.warmup = std::atoi(need());
    } else if (a == "--repeats") {
      o.repeats = std::max(1, std::atoi(need()));
    } else if (a == "--dtype") {
      o.dtypes.clear();
      std::stringstream ss(need());
      std::string t;
      while (std::getline(ss, t, ',')) {
        if (t == "fp16") {
          o.dtypes.push_back(fl::DType::f16);
        } else if (t == "bf16") {
          o.dtypes.push_back(fl::DType::bf16);
        } else {
          std::fprintf(stderr, "%s: --dtype takes fp16,bf16\n", kName);
          return 1;
        }
      }
    } else if (a == "--list") {
      for (const Candidate* c : all_candidates()) {
        const auto& s = c->spec;
        std::printf("%d d=%d Br=%d Bc=%d warps=%d stages=%d load=%d\n", s.index, s.head_dim,
                    s.config.br, s.config.bc, s.config.warps, s.config.stages, s.config.load);
      }
      return 0;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--out FILE] [--d 64,128] [--dtype fp16,bf16] [--n 1024,4096]\n"
                   "               [--batch 16] [--heads 16] [--warmup 3] [--repeats 20]\n"
                   "               [--candidates i,j,...] [--list]\n",
                   kName);
      return 1;
    }
  }

  std::string why_no_gpu;
  if (!fl::gpu_available(&why_no_gpu)) {
    std::fprintf(stderr, "%s: %s\n", kName, why_no_gpu.c_str());
    return 2;
  }
  int device = 0, major = 0, minor = 0;
  FL_CUDA_CHECK(cudaGetDevice(&device));
  FL_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  FL_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  const int cc = major * 10 + minor;
  Writer out(o.out);
  {
    std::ostringstream s;
    s << "{\"event\": \"device\", \"rung\": " << FL_TUNE_RUNG
      << ", \"gpu\": " << json_str(fl::device_name()) << ", \"cc\": " << cc
      << ", \"batch\": " << o.batch << ", \"heads\": " << o.heads << ", \"n\": [";
    for (size_t i = 0; i < o.n.size(); ++i) s << (i ? ", " : "") << o.n[i];
    s << "], \"warmup\": " << o.warmup << ", \"repeats\": " << o.repeats << "}";
    out.line(s.str());
  }

  const std::vector<const Candidate*> candidates = all_candidates();
  auto wanted = [&](const Candidate* c) {
    return o.candidates.empty() || std::find(o.candidates.begin(), o.candidates.end(),
                                             c->spec.index) != o.candidates.end();
  };

  fl::CublasHandle cublas;
  fl::EventTimer timer;
  fl::L2Flusher flusher;
  for (int64_t d : o.d) {
    for (fl::DType dtype : o.dtypes) {
      bool any = false;
      for (const Candidate* c : candidates) any = any || (c->spec.head_dim == d && wanted(c));
      if (!any) continue;
      // The check problem: GQA (8 query heads on 2 KV heads), LSE, a caller-chosen scale.
      Shape check;
      check.spec.dtype = dtype;
      check.spec.batch = 2;
      check.spec.heads_q = 8;
      check.spec.heads_kv = 2;
      check.spec.seqlen_q = check.spec.seqlen_k = 1024;
      check.spec.head_dim = d;
      check.spec.with_lse = true;
      check.spec.scale = 0.07f;
      check.spec.seed = 12;
      check.problem = std::make_unique<fl::Problem>(check.spec);
      check.reference = std::make_unique<fl::Reference>(*check.problem, cublas);
      std::vector<Shape> shapes(o.n.size());
      for (size_t s = 0; s < o.n.size(); ++s) {
        shapes[s].spec.dtype = dtype;
        shapes[s].spec.batch = o.batch;
        shapes[s].spec.heads_q = shapes[s].spec.heads_kv = o.heads;
        shapes[s].spec.seqlen_q = shapes[s].spec.seqlen_k = o.n[s];
        shapes[s].spec.head_dim = d;
        shapes[s].spec.seed = 100 + s;
        shapes[s].problem = std::make_unique<fl::Problem>(shapes[s].spec);
        shapes[s].reference = std::make_unique<fl::Reference>(*shapes[s].problem, cublas);
      }

      for (const Candidate* c : candidates) {
        if (c->spec.head_dim != d || !wanted(c)) continue;
        const auto& cfg = c->spec.config;
        std::ostringstream head;
        head << "\"candidate\": " << c->spec.index << ", \"d\": " << d << ", \"dtype\": \""
             << fl::to_string(dtype) << "\", \"config\": {\"br\": " << cfg.br
             << ", \"bc\": " << cfg.bc << ", \"warps\": " << cfg.warps
             << ", \"stages\": " << cfg.stages << ", \"load\": " << cfg.load << "}";
        out.line("{\"event\": \"start\", " + head.str() + "}");
        std::fprintf(stderr, "%s: candidate %d d=%lld %s Br=%d Bc=%d warps=%d stages=%d load=%d\n",
                     kName, c->spec.index, static_cast<long long>(d), fl::to_string(dtype), cfg.br,
                     cfg.bc, cfg.warps, cfg.stages, cfg.load);

        // The row's fields; written at the end, whatever happened on the way.
        std::string why, resources, check_json, shapes_json;
        bool ok = true;
        double score = 0;
        try {
          const cudaFuncAttributes attr = c->attributes(dtype);
          int blocks = 0;
          try {
            blocks = c->blocks_per_sm(dtype);
          } catch (const fl::CudaError& e) {  // e.g. more shared memory than the device has
            cudaGetLastError();
            why += std::string("occupancy: ") + e.what() + "; ";
            ok = false;
          }
          resources = ", \"regs\": " + std::to_string(attr.numRegs) +
                      ", \"local_bytes\": " + std::to_string(attr.localSizeBytes) +
                      ", \"smem\": " +
                      std::to_string(fl::k12_autotune::smem_bytes(cfg, static_cast<int>(d))) +
                      ", \"blocks_per_sm\": " + std::to_string(blocks);
          if (attr.localSizeBytes > 0) {
            why += "uses " + std::to_string(attr.localSizeBytes) +
                   " bytes of local memory (spills); ";
            ok = false;
          }
          const fl::KernelInfo& k = c->info(dtype);
          if (ok) {
            const std::string unsupported = fl::why_unsupported(k, check.problem->params());
            if (!unsupported.empty()) {
              why += "check problem: " + unsupported + "; ";
              ok = false;
            } else {
              const fl::Verdict v = fl::verify(k, *check.problem, *check.reference);
              check_json = ", \"check_err\": " + num(v.out.max_abs_err) +
                           ", \"check_tol\": " + num(v.tolerance);
              if (!v.passed) {
                why += "check problem: " + v.why;
                ok = false;
              }
            }
          }
          std::vector<double> tflops;
          for (size_t s = 0; s < shapes.size() && ok; ++s) {
            fl::Problem& pr = *shapes[s].problem;
            const fl::AttnParams& p = pr.params();
            const std::string n_str = "N=" + std::to_string(p.seqlen_q) + ": ";
            const std::string unsupported = fl::why_unsupported(k, p);
            if (!unsupported.empty()) {
              why += n_str + unsupported + "; ";
              ok = false;
              break;
            }
            const fl::Verdict v = fl::verify(k, pr, *shapes[s].reference);
            if (!v.passed) {
              why += n_str + v.why;
              ok = false;
            }
            for (int i = 0; i < o.warmup; ++i) fl::run_kernel(k, p);
            std::vector<float> times;
            for (int i = 0; i < o.repeats; ++i) {
              flusher.flush();
              timer.start();
              fl::run_kernel(k, p);
              times.push_back(timer.stop_ms());
            }
            std::sort(times.begin(), times.end());
            const double ms = times[times.size() / 2];
            const double tf = fl::attention_flops(p) / (ms * 1e-3) / 1e12;
            // The output of the timed runs must still be right.
            const fl::ErrorStats after = fl::compare_output(p, p.o, shapes[s].reference->out32());
            if (after.non_finite > 0 || after.max_abs_err > v.tolerance) {
              why += n_str + "output wrong after the timed runs; ";
              ok = false;
            }
            tflops.push_back(tf);
            shapes_json += std::string(shapes_json.empty() ? "" : ", ") + "{\"n\": " +
                           std::to_string(p.seqlen_q) + ", \"ms\": " + num(ms) +
                           ", \"tflops\": " + num(tf) + ", \"max_err\": " +
                           num(v.out.max_abs_err) + ", \"tol\": " + num(v.tolerance) + "}";
          }
          if (ok && tflops.size() == shapes.size() && !tflops.empty()) {
            double log_sum = 0;
            for (double t : tflops) log_sum += std::log(t);
            score = std::exp(log_sum / tflops.size());
          }
        } catch (const fl::UnsupportedError& e) {
          why += e.what();
          ok = false;
        } catch (const fl::CudaError& e) {
          // Launch-configuration errors leave the context usable; an error that poisons it
          // (cudaErrorIllegalAddress and the like) makes every later call fail: stop here.
          std::fprintf(stderr, "%s: candidate %d: %s\n", kName, c->spec.index, e.what());
          if (cudaDeviceSynchronize() != cudaSuccess) return 3;
          cudaGetLastError();
          why += e.what();
          ok = false;
        }
        if (!ok) score = 0;
        out.line("{\"event\": \"row\", " + head.str() + resources + check_json +
                 ", \"shapes\": [" + shapes_json + "], \"passed\": " + (ok ? "true" : "false") +
                 ", \"score\": " + num(score) + ", \"why\": " + json_str(why) + "}");
      }
    }
  }
  return 0;
}
