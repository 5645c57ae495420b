// ladder: run any kernel of the ladder (or all of them) on one attention shape, check it against
// the cuBLAS fp32 reference, time it, and print the table.
//
//   ./build/ladder                         every kernel, default shape, verified and timed
//   ./build/ladder --kernel 2 --n 4096     one kernel, N = 4096
//   ./build/ladder --kernel best --causal  the fastest kernel that takes the shape here
//   ./build/ladder --q q.npy --k k.npy --v v.npy --kernel 1 --o o.npy
//   ./build/ladder --list                  the kernels this build has
//   ./build/ladder --kernel 28 --dtype e4m3 --out-dtype bf16 --descale head
//   ./build/ladder --op backward           the backward rungs alone (dQ, dK, dV)
//   ./build/ladder --op forward --layout bnhd --batch 8 --heads 32 --heads-kv 8 --nq 1 --nk 32768
//                                          one decode step, every forward rung that takes it
//
// Decode (Nq <= 16 query rows against Nk keys): such a call reads all of K and V for few FLOPs a
// byte, so the forward's table gets a column more, GB/s of K + V: 2 x B x H_kv x Nk x d elements
// over the median time (Q and O, 2 x B x H_q x Nq x d, left out). The fp32 reference behind the
// check holds K and V in fp32 once a query head: where it does not fit, --no-verify times alone.
//
// Input types: the 16-bit rungs take fp16 and bf16 inputs, a rung with fp8_inputs (28) e4m3
// inputs only (O in fp16 or bf16, --out-dtype). With no --kernel, or with no --dtype, each kernel
// runs the shape in the type it takes: the 16-bit rungs in the 16-bit type (--dtype, or
// --out-dtype when --dtype is e4m3), the fp8 rungs in e4m3 with that type as O's (or
// --out-dtype), so that the table has a row for every rung; an fp8 rung's row says [e4m3]. With
// both --kernel and --dtype, every kernel named runs the type given (and one that does not take
// it is reported as skipped, with the rule).
//
// The backward (--op backward or both, the default): after the forward's table, a table of the
// backward rungs (29 on) on the same shape in its 16-bit type: each verified by the gradients'
// pass rule (fl::verify_backward: dQ, dK, dV each within twice its low-precision reference's
// error of the fp32 one), then timed as a whole call (pre-pass, main kernel, conversion), its
// TFLOP/s at fl::backward_flops (2.5 times the forward's FLOPs). A named kernel goes to the
// table of its op; --op forward or backward leaves the other table out (a kernel named of the
// op left out is an error). --list lists the forward rungs, or those of --op when it is given.
//
// Exit status: 0 when every kernel that ran passed, 1 when one failed, an explicitly named kernel
// refused the shape, or an argument was bad, 2 when there is no GPU.
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
#include "common/npy.h"
#include "common/registry.h"
#include "common/timing.h"

namespace {

using fl::KernelInfo;

struct Options {
  std::vector<std::string> kernels;  // empty = all
  fl::ProblemSpec spec;
  int warmup = 2, repeats = 10;
  bool verify = true, list = false;
  std::string q_path, k_path, v_path, o_path;
  bool o_fp16 = false;
  bool dtype_set = false, out_dtype_set = false;
  bool forward = true, backward = true;  // --op
  bool op_set = false;
};

void usage() {
  std::printf(
      "usage: ladder [options]\n"
      "  --kernel K       kernel number or name (repeat or comma-separate; default: all), or\n"
      "                   best: the fastest kernel that can run the shape on this GPU (the\n"
      "                   highest-numbered one that can)\n"
      "  --list           list the kernels of this build and exit (the forward rungs, or\n"
      "                   those of --op when it is given)\n"
      "  --op forward|backward|both  the tables to make (default both: the backward rungs'\n"
      "                   after the forward's)\n"
      "  --batch B        (default 8)      --heads H   (default 16)   --heads-kv H_kv\n"
      "  --n N            sets Nq = Nk (default 2048)   --nq Nq   --nk Nk\n"
      "                   (Nq <= 16, decode: the table adds GB/s of K + V read)\n"
      "  --d D            head dimension (default 128)\n"
      "  --dtype fp16|bf16|e4m3 (default fp16)  --causal   --lse   --layout bhnd|bnhd\n"
      "  --out-dtype fp16|bf16  O's type for e4m3 inputs (default: the 16-bit type, fp16)\n"
      "  --descale tensor|head  e4m3 scaling: one factor per tensor (default) or per head\n"
      "  --scale S        softmax scale (default 1/sqrt(d))\n"
      "  --std X          inputs are X * randn (default 1)   --seed S\n"
      "  --warmup W       untimed runs (default 2)   --repeats R  timed runs, median (default 10)\n"
      "  --no-verify      time only (for profilers)\n"
      "  --q/--k/--v F    read Q, K, V from .npy files ([B, H, N, d], fp16 or fp32)\n"
      "  --o F            write O of the last kernel run to F as fp32 .npy ([B, H, Nq, d])\n"
      "  --o-fp16         write O as fp16 instead\n");
}

bool parse(int argc, char** argv, Options& o) {
  auto need = [&](int& i) -> const char* {
    if (i + 1 >= argc) {
      std::fprintf(stderr, "ladder: %s needs a value\n", argv[i]);
      std::exit(1);
    }
    return argv[++i];
  };
  auto to_int = [](const char* flag, const char* s) -> int64_t {
    char* end = nullptr;
    const long long v = std::strtoll(s, &end, 10);
    if (end == s || *end != '\0') {
      std::fprintf(stderr, "ladder: %s expects an integer, got '%s'\n", flag, s);
      std::exit(1);
    }
    return v;
  };
  o.spec.batch = 8;
  o.spec.heads_q = o.spec.heads_kv = 16;
  o.spec.seqlen_q = o.spec.seqlen_k = 2048;
  bool heads_kv_set = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--kernel") {
      std::stringstream ss(need(i));
      std::string item;
      while (std::getline(ss, item, ',')) o.kernels.push_back(item);
    } else if (a == "--list") {
      o.list = true;
    } else if (a == "--op") {
      const std::string t = need(i);
      if (t != "forward" && t != "backward" && t != "both") {
        std::fprintf(stderr, "ladder: --op must be forward, backward or both, got '%s'\n",
                     t.c_str());
        return false;
      }
      o.forward = t != "backward";
      o.backward = t != "forward";
      o.op_set = true;
    } else if (a == "--batch") {
      o.spec.batch = to_int("--batch", need(i));
    } else if (a == "--heads") {
      o.spec.heads_q = to_int("--heads", need(i));
    } else if (a == "--heads-kv") {
      o.spec.heads_kv = to_int("--heads-kv", need(i));
      heads_kv_set = true;
    } else if (a == "--n") {
      o.spec.seqlen_q = o.spec.seqlen_k = to_int("--n", need(i));
    } else if (a == "--nq") {
      o.spec.seqlen_q = to_int("--nq", need(i));
    } else if (a == "--nk") {
      o.spec.seqlen_k = to_int("--nk", need(i));
    } else if (a == "--d") {
      o.spec.head_dim = to_int("--d", need(i));
    } else if (a == "--dtype") {
      const std::string t = need(i);
      if (!fl::parse_dtype(t, &o.spec.dtype)) {
        std::fprintf(stderr, "ladder: --dtype must be fp16, bf16 or e4m3, got '%s'\n", t.c_str());
        return false;
      }
      o.dtype_set = true;
    } else if (a == "--out-dtype") {
      const std::string t = need(i);
      if (!fl::parse_dtype(t, &o.spec.out_dtype) || o.spec.out_dtype == fl::DType::e4m3) {
        std::fprintf(stderr,
                     "ladder: --out-dtype must be fp16 or bf16 (O's type for e4m3 inputs), "
                     "got '%s'\n",
                     t.c_str());
        return false;
      }
      o.out_dtype_set = true;
    } else if (a == "--descale") {
      const std::string t = need(i);
      if (t == "tensor") {
        o.spec.descale_per_head = false;
      } else if (t == "head") {
        o.spec.descale_per_head = true;
      } else {
        std::fprintf(stderr, "ladder: --descale must be tensor or head, got '%s'\n", t.c_str());
        return false;
      }
    } else if (a == "--causal") {
      o.spec.causal = true;
    } else if (a == "--lse") {
      o.spec.with_lse = true;
    } else if (a == "--layout") {
      const std::string t = need(i);
      if (t == "bhnd") {
        o.spec.layout = fl::Layout::BHND;
      } else if (t == "bnhd") {
        o.spec.layout = fl::Layout::BNHD;
      } else {
        std::fprintf(stderr, "ladder: --layout must be bhnd or bnhd\n");
        return false;
      }
    } else if (a == "--scale") {
      o.spec.scale = std::strtof(need(i), nullptr);
    } else if (a == "--std") {
      o.spec.input_std = std::strtof(need(i), nullptr);
    } else if (a == "--seed") {
      o.spec.seed = static_cast<uint64_t>(to_int("--seed", need(i)));
    } else if (a == "--warmup") {
      o.warmup = static_cast<int>(to_int("--warmup", need(i)));
    } else if (a == "--repeats") {
      o.repeats = static_cast<int>(to_int("--repeats", need(i)));
    } else if (a == "--no-verify") {
      o.verify = false;
    } else if (a == "--q") {
      o.q_path = need(i);
    } else if (a == "--k") {
      o.k_path = need(i);
    } else if (a == "--v") {
      o.v_path = need(i);
    } else if (a == "--o") {
      o.o_path = need(i);
    } else if (a == "--o-fp16") {
      o.o_fp16 = true;
    } else if (a == "-h" || a == "--help") {
      usage();
      std::exit(0);
    } else {
      std::fprintf(stderr, "ladder: unknown option '%s'\n", a.c_str());
      usage();
      return false;
    }
  }
  if (!heads_kv_set) o.spec.heads_kv = o.spec.heads_q;
  if (o.repeats < 1 || o.warmup < 0) {
    std::fprintf(stderr, "ladder: --repeats must be >= 1 and --warmup >= 0\n");
    return false;
  }
  return true;
}

// Reads Q, K, V from .npy files into the spec's shape; returns the fp32 data.
bool load_inputs(Options& o, fl::npy::Array& q, fl::npy::Array& k, fl::npy::Array& v) {
  if (o.q_path.empty() && o.k_path.empty() && o.v_path.empty()) return false;
  if (o.q_path.empty() || o.k_path.empty() || o.v_path.empty()) {
    throw std::runtime_error("--q, --k and --v go together");
  }
  q = fl::npy::load(o.q_path);
  k = fl::npy::load(o.k_path);
  v = fl::npy::load(o.v_path);
  for (const auto* a : {&q, &k, &v}) {
    if (a->shape.size() != 4) throw std::runtime_error("inputs must be 4-D [B, H, N, d]");
  }
  if (k.shape != v.shape) throw std::runtime_error("K and V must have the same shape");
  if (q.shape[0] != k.shape[0] || q.shape[3] != k.shape[3]) {
    throw std::runtime_error("Q and K must agree on B and d");
  }
  o.spec.batch = q.shape[0];
  o.spec.heads_q = q.shape[1];
  o.spec.seqlen_q = q.shape[2];
  o.spec.head_dim = q.shape[3];
  o.spec.heads_kv = k.shape[1];
  o.spec.seqlen_k = k.shape[2];
  o.spec.layout = fl::Layout::BHND;
  return true;
}

// Query rows up to which a call is a decode step: its table gives GB/s of K + V as well.
constexpr int64_t kDecodeMaxRows = 16;

// Bytes of K and V, what a decode call must read at least: 2 x B x H_kv x Nk x d elements.
double kv_bytes(const fl::AttnParams& p) {
  return 2.0 * static_cast<double>(p.batch * p.heads_kv * p.seqlen_k * p.head_dim) *
         static_cast<double>(fl::element_size(p.dtype));
}

struct Row {
  const KernelInfo* kernel;
  std::string status;  // "pass", "FAIL", "skip"
  std::string note;
  double ms = 0, tflops = 0, tile_ai = 0, min_ai = 0;
  double max_err = 0, tol = 0;
  bool e4m3 = false;  // ran on e4m3 inputs
  double gbps = 0;    // GB/s of K + V (printed for a decode shape)
};

// The two versions of the shape: the 16-bit one and the e4m3 one (see the top of this file).
struct Specs {
  fl::ProblemSpec b16, e4m3;
};
Specs both_types(const Options& o) {
  Specs s{o.spec, o.spec};
  const fl::DType t16 = o.spec.dtype == fl::DType::e4m3 ? o.spec.out_dtype : o.spec.dtype;
  s.b16.dtype = t16;
  s.e4m3.dtype = fl::DType::e4m3;
  s.e4m3.out_dtype = o.out_dtype_set ? o.spec.out_dtype : t16;
  return s;
}

// One problem, its reference, and what it is for.
struct Run {
  fl::ProblemSpec spec;
  std::unique_ptr<fl::Problem> problem;
  std::unique_ptr<fl::Reference> reference;
};

std::string fmt(double x, int precision = 1) {
  char b[64];
  std::snprintf(b, sizeof(b), "%.*f", precision, x);
  return b;
}

// Q, K, V read from .npy files (--q, --k, --v), for both tables.
struct Inputs {
  bool from_files = false;
  fl::npy::Array q, k, v;
};

// The forward's table over `kernels` (nullptr: best); the exit status.
int forward_table(Options& opt, std::vector<const KernelInfo*> kernels, bool explicit_kernels,
                  const Inputs& in) {
  try {
    const fl::npy::Array &nq = in.q, &nk = in.k, &nv = in.v;
    const bool from_files = in.from_files;
    // Each kernel in the type it takes, unless both the kernels and the type were named.
    const bool by_kernel_type = !explicit_kernels || !opt.dtype_set;
    const Specs specs = both_types(opt);
    Run runs[2];  // [0]: 16-bit inputs, [1]: e4m3 inputs
    runs[0].spec = specs.b16;
    runs[1].spec = specs.e4m3;
    const int primary = opt.spec.dtype == fl::DType::e4m3 ? 1 : 0;
    auto make_problem = [&](int i) {
      if (runs[i].problem != nullptr) return;
      runs[i].problem = std::make_unique<fl::Problem>(runs[i].spec);
      if (from_files) runs[i].problem->set_inputs(nq.data.data(), nk.data.data(), nv.data.data());
    };
    make_problem(primary);
    std::printf("%s on %s\n", runs[primary].spec.describe().c_str(), fl::device_name().c_str());
    for (const KernelInfo*& k : kernels) {
      if (k != nullptr) continue;
      std::string why;
      k = fl::best_kernel(runs[primary].problem->params(), &why);
      if (k == nullptr) {
        std::fprintf(stderr, "ladder: best: %s\n", why.c_str());
        return 1;
      }
      std::printf("best: %s\n", k->name().c_str());
    }
    // The run each kernel uses.
    auto run_of = [&](const KernelInfo* k) {
      return by_kernel_type ? (k->fp8_inputs ? 1 : 0) : primary;
    };
    for (const KernelInfo* k : kernels) {
      const int i = run_of(k);
      if (runs[i].problem == nullptr) {
        make_problem(i);
        std::printf("%s for the rungs that take %s inputs\n", runs[i].spec.describe().c_str(),
                    i == 1 ? "e4m3" : "16-bit");
      }
    }

    fl::CublasHandle cublas;
    if (opt.verify) {
      for (Run& r : runs) {
        if (r.problem != nullptr) r.reference = std::make_unique<fl::Reference>(*r.problem, cublas);
      }
    }

    fl::EventTimer timer;
    fl::L2Flusher flusher;
    std::vector<Row> rows;
    bool failed = false;
    fl::Problem* last = nullptr;  // the problem of the last kernel run (--o)
    for (const KernelInfo* k : kernels) {
      Run& run = runs[run_of(k)];
      fl::Problem& problem = *run.problem;
      const fl::AttnParams& p = problem.params_for(*k);  // with its workspace, if it needs one
      const std::unique_ptr<fl::Reference>& reference = run.reference;
      Row row{k, "", "", 0, 0, 0, 0, 0, 0};
      row.e4m3 = p.dtype == fl::DType::e4m3;
      row.min_ai = fl::problem_intensity(p);
      const std::string why = fl::why_unsupported(*k, p);
      if (!why.empty()) {
        row.status = "skip";
        row.note = why;
        rows.push_back(row);
        if (explicit_kernels) failed = true;
        continue;
      }
      const fl::TileShape t = k->tile(p);
      row.tile_ai = fl::tile_intensity(t.br, t.bc, p.seqlen_k, p.head_dim, fl::element_size(p.dtype));
      fl::Verdict verdict;
      if (opt.verify) {
        verdict = fl::verify(*k, problem, *reference);
        row.max_err = verdict.out.max_abs_err;
        row.tol = verdict.tolerance;
      }
      // Warm-up, then timed repeats with the L2 flushed before each; median.
      for (int i = 0; i < opt.warmup; ++i) fl::run_kernel(*k, p);
      std::vector<float> times;
      for (int i = 0; i < opt.repeats; ++i) {
        flusher.flush();
        timer.start();
        fl::run_kernel(*k, p);
        times.push_back(timer.stop_ms());
        if (times.back() > 2000.f && i >= 2) break;  // a slow rung: three repeats are enough
      }
      std::sort(times.begin(), times.end());
      row.ms = times[times.size() / 2];
      row.tflops = fl::attention_flops(p) / (row.ms * 1e-3) / 1e12;
      row.gbps = kv_bytes(p) / (row.ms * 1e-3) / 1e9;
      if (opt.verify) {
        // Re-check the output left by the timed runs: a kernel that breaks under repetition
        // cannot post a time.
        const fl::ErrorStats after = fl::compare_output(p, p.o, reference->out32());
        if (!verdict.passed) {
          row.status = "FAIL";
          row.note = verdict.why;
        } else if (after.non_finite > 0 || after.max_abs_err > verdict.tolerance) {
          row.status = "FAIL";
          row.note = "output wrong after the timed runs";
        } else {
          row.status = "pass";
        }
        if (row.status == "FAIL") failed = true;
      } else {
        row.status = "timed";
      }
      rows.push_back(row);
      last = &problem;
    }

    if (!opt.o_path.empty()) {
      if (last == nullptr) last = runs[primary].problem.get();  // no kernel ran: O as it is
      const fl::AttnParams& p = last->params();
      std::vector<float> out = last->output_host();
      fl::npy::save(opt.o_path, {p.batch, p.heads_q, p.seqlen_q, p.head_dim}, out, opt.o_fp16);
      std::printf("wrote O to %s\n", opt.o_path.c_str());
    }

    // The table: % of the cuBLAS baseline (kernel 00) and of the rung before; for a decode
    // shape, GB/s of K + V after TFLOP/s.
    double baseline = 0;
    for (const Row& r : rows) {
      if (r.kernel->number == 0 && r.tflops > 0) baseline = r.tflops;
    }
    const bool decode = opt.spec.seqlen_q <= kDecodeMaxRows;
    std::printf("\n%-20s %9s %9s", "kernel", "ms", "TFLOP/s");
    if (decode) std::printf(" %9s", "GB/s K+V");
    std::printf(" %8s %8s %9s %9s %10s %10s  %s\n", "%cuBLAS", "%prev", "AI tile", "AI min",
                "max err", "tolerance", "check");
    double prev = 0;
    for (const Row& r : rows) {
      if (r.status == "skip") {
        std::printf("%-20s %s\n", r.kernel->name().c_str(), ("skipped: " + r.note).c_str());
        continue;
      }
      const std::string pct_base = baseline > 0 ? fmt(100.0 * r.tflops / baseline) : "-";
      const std::string pct_prev = (prev > 0 && r.kernel->number > 0) ? fmt(100.0 * r.tflops / prev) : "-";
      const std::string name = r.kernel->name() + (r.e4m3 ? " [e4m3]" : "");
      std::printf("%-20s %9.3f %9.2f", name.c_str(), r.ms, r.tflops);
      if (decode) std::printf(" %9.1f", r.gbps);
      std::printf(" %8s %8s %9.1f %9.1f %10.2e %10.2e  %s%s%s\n", pct_base.c_str(),
                  pct_prev.c_str(), r.tile_ai, r.min_ai, r.max_err, r.tol, r.status.c_str(),
                  r.note.empty() ? "" : ": ", r.note.c_str());
      if (r.kernel->number > 0) prev = r.tflops;
    }
    return failed ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ladder: %s\n", e.what());
    return 1;
  }
}

struct BwdRow {
  const KernelInfo* kernel;
  std::string status;  // "pass", "FAIL", "skip", "timed"
  std::string note;
  double ms = 0, tflops = 0;
  double err_over_tol[fl::kGrads] = {0, 0, 0};  // max error / tolerance, per gradient
};

// The backward's table over `kernels` (nullptr: best) on the shape in its 16-bit type; the exit
// status.
int backward_table(const Options& opt, std::vector<const KernelInfo*> kernels,
                   bool explicit_kernels, const Inputs& in) {
  // The backward takes fp16 and bf16: the shape in the 16-bit type of the forward's rungs,
  // unless both the kernels and e4m3 were named (then every row is refused with the rule).
  const bool e4m3_named = explicit_kernels && opt.dtype_set && opt.spec.dtype == fl::DType::e4m3;
  const fl::ProblemSpec spec = e4m3_named ? opt.spec : both_types(opt).b16;
  try {
    fl::CublasHandle cublas;
    std::unique_ptr<fl::BwdProblem> problem;
    std::unique_ptr<fl::BwdReference> reference;
    if (!e4m3_named) {
      problem = std::make_unique<fl::BwdProblem>(spec, cublas);
      if (in.from_files) problem->set_inputs(in.q.data.data(), in.k.data.data(), in.v.data.data(),
                                             cublas);
    }
    std::printf("\nbackward: %s on %s\n", spec.describe().c_str(), fl::device_name().c_str());
    for (const KernelInfo*& k : kernels) {
      if (k != nullptr) continue;
      std::string why = "the backward takes fp16 and bf16 inputs (got e4m3)";
      if (problem != nullptr) {
        // A workspace as large as any backward rung asks (allocated once, before any timing), so
        // that the call best judges is the one the chosen rung will get.
        for (const KernelInfo* r : fl::backward_kernels()) problem->prepare_workspace(*r);
      }
      k = problem != nullptr ? fl::best_backward_kernel(problem->params(), &why) : nullptr;
      if (k == nullptr) {
        std::fprintf(stderr, "ladder: best backward: %s\n", why.c_str());
        return 1;
      }
      std::printf("best backward: %s\n", k->name().c_str());
    }
    if (opt.verify && problem != nullptr) {
      reference = std::make_unique<fl::BwdReference>(*problem, cublas);
    }

    fl::EventTimer timer;
    fl::L2Flusher flusher;
    std::vector<BwdRow> rows;
    bool failed = false;
    for (const KernelInfo* k : kernels) {
      BwdRow row{k, "", ""};
      // Decided on placeholder pointers first, so that no workspace is sized for a refused rung.
      const std::string why =
          fl::why_unsupported_backward(*k, fl::placeholder_bwd_params(spec, *k));
      if (!why.empty()) {
        row.status = "skip";
        row.note = why;
        rows.push_back(row);
        if (explicit_kernels) failed = true;
        continue;
      }
      problem->prepare_workspace(*k);  // allocated here, never inside the timed runs
      const fl::BwdParams& b = problem->params();
      fl::BwdVerdict verdict;
      if (opt.verify) {
        verdict = fl::verify_backward(*k, *problem, *reference);
        for (fl::Grad g : fl::kAllGrads) {
          const fl::GradVerdict& v = verdict[g];
          row.err_over_tol[static_cast<int>(g)] = v.err.max_abs_err / v.tolerance;
        }
      }
      // Warm-up, then timed calls (each a whole backward) with the L2 flushed before each; median.
      for (int i = 0; i < opt.warmup; ++i) fl::run_backward(*k, b);
      std::vector<float> times;
      for (int i = 0; i < opt.repeats; ++i) {
        times.push_back(fl::time_backward_ms(*k, *problem, timer, flusher));
        if (times.back() > 2000.f && i >= 2) break;  // a slow rung: three repeats are enough
      }
      std::sort(times.begin(), times.end());
      row.ms = times[times.size() / 2];
      row.tflops = fl::backward_flops(b.fwd) / (row.ms * 1e-3) / 1e12;
      if (opt.verify) {
        // The gradients left by the timed runs are checked again, by the same rule.
        std::string after;
        for (fl::Grad g : fl::kAllGrads) {
          const fl::ErrorStats e =
              fl::compare_gradient(b, g, problem->grad(g), reference->grad32(g));
          after += fl::gradient_failures(b, g, e, verdict[g].tolerance);
        }
        if (!verdict.passed) {
          row.status = "FAIL";
          row.note = verdict.why;
        } else if (!after.empty()) {
          row.status = "FAIL";
          row.note = "gradients wrong after the timed runs: " + after;
        } else {
          row.status = "pass";
        }
        if (row.status == "FAIL") failed = true;
      } else {
        row.status = "timed";
      }
      rows.push_back(row);
    }

    // The table: TFLOP/s at the backward's FLOPs, % of the backward rung before, each gradient's
    // max error over its tolerance (the pass rule holds at <= 1).
    std::printf("\n%-20s %9s %9s %8s %10s %10s %10s  %s\n", "kernel", "ms", "TFLOP/s", "%prev",
                "dQ err/tol", "dK err/tol", "dV err/tol", "check");
    double prev = 0;
    for (const BwdRow& r : rows) {
      if (r.status == "skip") {
        std::printf("%-20s %s\n", r.kernel->name().c_str(), ("skipped: " + r.note).c_str());
        continue;
      }
      const std::string pct_prev = prev > 0 ? fmt(100.0 * r.tflops / prev) : "-";
      std::printf("%-20s %9.3f %9.2f %8s %10.2f %10.2f %10.2f  %s%s%s\n",
                  r.kernel->name().c_str(), r.ms, r.tflops, pct_prev.c_str(), r.err_over_tol[0],
                  r.err_over_tol[1], r.err_over_tol[2], r.status.c_str(),
                  r.note.empty() ? "" : ": ", r.note.c_str());
      prev = r.tflops;
    }
    return failed ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ladder: %s\n", e.what());
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  if (!parse(argc, argv, opt)) return 1;

  if (opt.list) {
    // The forward rungs (scripts count these lines), or the rungs of the --op given.
    const bool forward = !opt.op_set || opt.forward, backward = opt.op_set && opt.backward;
    for (const KernelInfo* k : fl::all_kernels()) {
      if (k->op == fl::Op::forward ? forward : backward) {
        std::printf("%-22s %s\n", k->name().c_str(), k->title);
      }
    }
    return 0;
  }

  // A shape that no kernel can run (a size < 1, H_q not a multiple of H_kv, a bad scale) is
  // refused here, on any machine, with the rule it breaks.
  const std::string bad_shape = fl::check_shape(opt.spec.params());
  if (!bad_shape.empty()) {
    std::fprintf(stderr, "ladder: %s: %s\n", opt.spec.describe().c_str(), bad_shape.c_str());
    return 1;
  }

  std::string why_no_gpu;
  if (!fl::gpu_available(&why_no_gpu)) {
    std::fprintf(stderr, "ladder: %s. The kernels need an NVIDIA GPU (sm_80 or newer).\n",
                 why_no_gpu.c_str());
    return 2;
  }

  // The kernels of each table: a named kernel goes to the table of its op.
  std::vector<const KernelInfo*> forward, backward;
  if (opt.kernels.empty()) {
    if (opt.forward) forward = fl::forward_kernels();
    if (opt.backward) backward = fl::backward_kernels();
  } else {
    for (const std::string& key : opt.kernels) {
      if (key == "best") {  // resolved below, once the problem's tensors exist
        if (opt.forward) forward.push_back(nullptr);
        // The backward's best too, where the build has backward rungs (or it was asked for).
        if (opt.backward && (!fl::backward_kernels().empty() || opt.op_set)) {
          backward.push_back(nullptr);
        }
        continue;
      }
      const KernelInfo* k = fl::find_kernel(key);
      if (k == nullptr) {
        std::fprintf(stderr, "ladder: no kernel '%s' in this build (see --list)\n", key.c_str());
        return 1;
      }
      const bool is_forward = k->op == fl::Op::forward;
      if (is_forward ? !opt.forward : !opt.backward) {
        std::fprintf(stderr, "ladder: kernel %s is a %s rung, and --op leaves the %s out\n",
                     k->name().c_str(), is_forward ? "forward" : "backward",
                     is_forward ? "forward" : "backward");
        return 1;
      }
      (is_forward ? forward : backward).push_back(k);
    }
  }
  const bool explicit_kernels = !opt.kernels.empty();

  Inputs in;
  try {
    in.from_files = load_inputs(opt, in.q, in.k, in.v);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ladder: %s\n", e.what());
    return 1;
  }
  int status = 0;
  if (!forward.empty()) status = forward_table(opt, forward, explicit_kernels, in);
  if (!backward.empty()) {
    status = std::max(status, backward_table(opt, backward, explicit_kernels, in));
  }
  return status;
}
