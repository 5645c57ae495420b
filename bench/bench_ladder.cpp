// Google Benchmark over the registry x the project's sweep (d = 128, H = 16, N = 512 ... 16384).
//
//   ./build/ladder_bench --benchmark_out=results.json --benchmark_out_format=json
//   ./build/ladder_bench --ladder_kernels=0,1,2 --ladder_n=512,1024 --ladder_d=128,64
//
// Each (kernel, shape) is verified once against the fp32 reference before it is timed (a failing
// kernel is reported as an error, with no time), timed with CUDA events around one launch per
// iteration with the L2 flushed before each, and its output checked again after timing.
// Counters: TFLOPS (FLOPs over the median... per repetition: total FLOPs over total event time;
// 4 B H Nq Nk d, halved when causal, whatever the input type),
// AI_tile and AI_min (FLOP/byte, docs/methodology.md), and the shape.
//
// The backward rungs (29 on) get rows of their own on the same shapes in the 16-bit types,
// named ladder_bwd/...: verified once by the gradients' pass rule (fl::verify_backward), each
// iteration one whole backward call (pre-pass, main kernel, conversion) with the L2 flushed
// before it, the gradients checked again after timing. Their TFLOPS counter is at
// fl::backward_flops (2.5 times the forward's FLOPs, halved when causal); counter backward = 1
// (0 on the forward's rows), no AI counters (the tile model is the forward's).
//
// Ladder flags (parsed before Google Benchmark's own):
//   --ladder_kernels=LIST   kernel numbers (default: all)
//   --ladder_n=LIST         sequence lengths (default 512,...,16384; B = 16 up to 4096, 8 at
//                           8192, 4 at 16384, H = 16)
//   --ladder_d=LIST         head dims (default 128)
//   --ladder_dtype=LIST     input types: fp16, bf16, e4m3 (default fp16). A kernel runs the
//                           types it takes: the 16-bit rungs fp16 and bf16, a rung with
//                           fp8_inputs (27) e4m3 (O fp16). Without e4m3 in the list, an fp8 rung
//                           runs e4m3 inputs with each listed 16-bit type as O's, so that the
//                           default sweep (and --ladder_kernels=27,28) times both on each shape;
//                           its benchmarks are named .../e4m3/... (O fp16) or .../e4m3-bf16/...
//   --ladder_causal=0,1     (default 0)
//   --ladder_max_seconds=S  skip a (kernel, shape) whose predicted single run exceeds S seconds
//                           (predicted from the same kernel's previous, smaller shape; 0 = off)
//   --ladder_op=forward|backward|both  the rows to register (default both)
//   --ladder_decode=0|1     the decode rows (default 1; forward rows, so --ladder_op=backward
//                           leaves them out too)
//
// The decode rows, named ladder_decode/...: one query row a sequence (Nq = 1) against a long K/V
// cache in the serving layout (BNHD: K, V [B, Nk, H_kv, d]), d = 128, in each 16-bit type of
// --ladder_dtype, over B in 1, 8, 64, Nk in 4096, 32768, 131072, heads 32/8 (GQA) and 32/32
// (MHA); for each shape the highest-numbered kernel of the selection that takes it (with no
// --ladder_kernels, the library's best). Verified and timed as the other forward rows. Decode
// reads all of K and V for a few FLOPs a byte, so its measure is counter GBps: the bytes of K and
// V (2 B H_kv Nk d x 2 bytes; Q and O, 0.1% of that at most here, left out) per second of GPU
// time, in GB/s (10^9 B/s). A shape whose tensors do not fit in the free device memory is not
// registered; one whose fp32 reference (common/reference.cu) does not fit is reported as an error
// row that says so.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/cuda_check.h"
#include "common/harness.h"
#include "common/registry.h"
#include "common/timing.h"

namespace {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

struct Flags {
  std::vector<std::string> kernels;
  std::vector<int64_t> n = {512, 1024, 2048, 4096, 8192, 16384};
  std::vector<int64_t> d = {128};
  std::vector<fl::DType> dtypes = {fl::DType::f16};
  bool e4m3_listed = false;  // e4m3 named in --ladder_dtype
  std::vector<bool> causal = {false};
  double max_seconds = 0;
  bool forward = true, backward = true;  // --ladder_op
  bool decode = true;                    // --ladder_decode
};

// Removes the --ladder_* flags from argv so that Google Benchmark sees only its own.
Flags parse_flags(int* argc, char** argv) {
  Flags f;
  int out = 1;
  for (int i = 1; i < *argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* name) -> const char* {
      const std::string prefix = std::string(name) + "=";
      return a.rfind(prefix, 0) == 0 ? argv[i] + prefix.size() : nullptr;
    };
    if (const char* v = value("--ladder_kernels")) {
      f.kernels = split(v);
    } else if (const char* v = value("--ladder_n")) {
      f.n.clear();
      for (auto& x : split(v)) f.n.push_back(std::stoll(x));
    } else if (const char* v = value("--ladder_d")) {
      f.d.clear();
      for (auto& x : split(v)) f.d.push_back(std::stoll(x));
    } else if (const char* v = value("--ladder_dtype")) {
      f.dtypes.clear();
      for (auto& x : split(v)) {
        fl::DType t;
        if (fl::parse_dtype(x, &t)) {
          f.dtypes.push_back(t);
          if (t == fl::DType::e4m3) f.e4m3_listed = true;
        } else {
          std::fprintf(stderr, "ladder_bench: --ladder_dtype takes fp16, bf16 and e4m3, got '%s'\n",
                       x.c_str());
          std::exit(1);
        }
      }
    } else if (const char* v = value("--ladder_causal")) {
      f.causal.clear();
      for (auto& x : split(v)) f.causal.push_back(x == "1");
    } else if (const char* v = value("--ladder_max_seconds")) {
      f.max_seconds = std::stod(v);
    } else if (const char* v = value("--ladder_op")) {
      const std::string op = v;
      if (op != "forward" && op != "backward" && op != "both") {
        std::fprintf(stderr,
                     "ladder_bench: --ladder_op takes forward, backward or both, got '%s'\n", v);
        std::exit(1);
      }
      f.forward = op != "backward";
      f.backward = op != "forward";
    } else if (const char* v = value("--ladder_decode")) {
      const std::string on = v;
      if (on != "0" && on != "1") {
        std::fprintf(stderr, "ladder_bench: --ladder_decode takes 0 or 1, got '%s'\n", v);
        std::exit(1);
      }
      f.decode = on == "1";
    } else {
      argv[out++] = argv[i];
    }
  }
  *argc = out;
  return f;
}

int64_t batch_for(int64_t n) { return n <= 4096 ? 16 : (n == 8192 ? 8 : 4); }

// One problem (inputs + references) at a time: benchmarks are registered shape by shape, so each
// shape's inputs and references are built once and shared by every kernel.
struct Cache {
  std::string key;
  std::unique_ptr<fl::Problem> problem;
  std::unique_ptr<fl::Reference> reference;
  std::set<std::string> verified;            // kernel names verified on this shape
  std::map<int, double> last_tflops;         // kernel number -> TFLOP/s at its last shape
};
Cache& cache() {
  static Cache c;
  return c;
}
fl::CublasHandle& cublas() {
  static fl::CublasHandle h;
  return h;
}
fl::L2Flusher& flusher() {
  static fl::L2Flusher f;
  return f;
}

// Bytes of K and V, what a decode call must read: 2 x B x H_kv x Nk x d elements.
double kv_bytes(const fl::AttnParams& p) {
  return 2.0 * static_cast<double>(p.batch * p.heads_kv * p.seqlen_k * p.head_dim) *
         static_cast<double>(fl::element_size(p.dtype));
}

// decode: the row is a ladder_decode one (counters GBps, Nk and H_kv as well).
void run_one(benchmark::State& state, const fl::KernelInfo* kernel, fl::ProblemSpec spec,
             double max_seconds, bool decode) {
  Cache& c = cache();
  const std::string key = spec.describe();
  if (c.key != key) {
    c.reference.reset();
    c.problem.reset();
    c.key.clear();
    c.verified.clear();
    try {
      c.problem = std::make_unique<fl::Problem>(spec);
      c.reference = std::make_unique<fl::Reference>(*c.problem, cublas());
    } catch (const fl::CudaError& e) {
      // Out of device memory, most likely (the fp32 reference holds K and V in fp32, for every
      // query head): no row, and no error left behind for the next launch check.
      c.reference.reset();
      c.problem.reset();
      cudaGetLastError();
      state.SkipWithError(("the problem and its fp32 reference do not fit: " +
                           std::string(e.what())).c_str());
      return;
    }
    c.key = key;
  }
  fl::Problem& problem = *c.problem;
  const fl::AttnParams& p = problem.params_for(*kernel);  // its workspace, if it needs one
  const double flops = fl::attention_flops(p);

  if (max_seconds > 0 && c.last_tflops.count(kernel->number) &&
      flops / (c.last_tflops[kernel->number] * 1e12) > max_seconds) {
    state.SkipWithError("skipped: predicted run time above --ladder_max_seconds");
    return;
  }
  if (c.verified.count(kernel->name()) == 0) {
    const fl::Verdict v = fl::verify(*kernel, problem, *c.reference);
    if (!v.passed) {
      state.SkipWithError(("verification failed: " + v.why).c_str());
      return;
    }
    c.verified.insert(kernel->name());
    fl::run_kernel(*kernel, p);  // warm-up
    FL_CUDA_CHECK(cudaDeviceSynchronize());
  }

  fl::EventTimer timer;
  double total_s = 0;
  int64_t runs = 0;
  for (auto _ : state) {
    flusher().flush();
    timer.start();
    fl::run_kernel(*kernel, p);
    const double s = timer.stop_ms() * 1e-3;
    state.SetIterationTime(s);
    total_s += s;
    ++runs;
  }
  const fl::ErrorStats after = fl::compare_output(p, p.o, c.reference->out32());
  if (after.non_finite > 0 || after.max_abs_err > fl::pass_tolerance(c.reference->lowp_err_for(*kernel))) {
    state.SkipWithError("output wrong after the timed runs");
    return;
  }
  const double tflops = flops * static_cast<double>(runs) / total_s / 1e12;
  c.last_tflops[kernel->number] = tflops;
  const fl::TileShape t = kernel->tile(p);
  state.counters["TFLOPS"] = tflops;
  state.counters["AI_tile"] =
      fl::tile_intensity(t.br, t.bc, p.seqlen_k, p.head_dim, fl::element_size(p.dtype));
  state.counters["AI_min"] = fl::problem_intensity(p);
  state.counters["kernel"] = kernel->number;
  state.counters["B"] = static_cast<double>(p.batch);
  state.counters["H"] = static_cast<double>(p.heads_q);
  state.counters["N"] = static_cast<double>(p.seqlen_q);
  state.counters["d"] = static_cast<double>(p.head_dim);
  state.counters["causal"] = p.causal ? 1 : 0;
  state.counters["backward"] = 0;
  if (decode) {
    state.counters["Nk"] = static_cast<double>(p.seqlen_k);
    state.counters["H_kv"] = static_cast<double>(p.heads_kv);
    // Bytes of all the timed runs, in GB; kIsRate divides by their (manual) time: GB/s.
    state.counters["GBps"] = benchmark::Counter(kv_bytes(p) * static_cast<double>(runs) / 1e9,
                                                benchmark::Counter::kIsRate);
  }
  std::string label = fl::to_string(p.dtype);
  if (p.dtype == fl::DType::e4m3 && p.out_dtype != fl::DType::f16) {
    label += std::string(" O=") + fl::to_string(p.out_dtype);
  }
  state.SetLabel(label);
}

// The backward's problem and references, one shape at a time, as Cache for the forward.
struct BwdCache {
  std::string key;
  std::unique_ptr<fl::BwdProblem> problem;
  std::unique_ptr<fl::BwdReference> reference;
  std::set<std::string> verified;     // kernel names verified on this shape
  std::map<int, double> last_tflops;  // kernel number -> TFLOP/s at its last shape
};
BwdCache& bwd_cache() {
  static BwdCache c;
  return c;
}

void run_backward_one(benchmark::State& state, const fl::KernelInfo* kernel, fl::ProblemSpec spec,
                      double max_seconds) {
  BwdCache& c = bwd_cache();
  const std::string key = spec.describe();
  if (c.key != key) {
    c.reference.reset();
    c.problem.reset();
    c.problem = std::make_unique<fl::BwdProblem>(spec, cublas());
    c.reference = std::make_unique<fl::BwdReference>(*c.problem, cublas());
    c.key = key;
    c.verified.clear();
  }
  fl::BwdProblem& problem = *c.problem;
  const double flops = fl::backward_flops(problem.params().fwd);

  if (max_seconds > 0 && c.last_tflops.count(kernel->number) &&
      flops / (c.last_tflops[kernel->number] * 1e12) > max_seconds) {
    state.SkipWithError("skipped: predicted run time above --ladder_max_seconds");
    return;
  }
  problem.prepare_workspace(*kernel);  // allocated here, outside the timed loop
  const fl::BwdParams& b = problem.params();
  if (c.verified.count(kernel->name()) == 0) {
    const fl::BwdVerdict v = fl::verify_backward(*kernel, problem, *c.reference);
    if (!v.passed) {
      state.SkipWithError(("verification failed: " + v.why).c_str());
      return;
    }
    c.verified.insert(kernel->name());
    fl::run_backward(*kernel, b);  // warm-up
    FL_CUDA_CHECK(cudaDeviceSynchronize());
  }

  fl::EventTimer timer;
  double total_s = 0;
  int64_t runs = 0;
  for (auto _ : state) {
    const double s = fl::time_backward_ms(*kernel, problem, timer, flusher()) * 1e-3;
    state.SetIterationTime(s);
    total_s += s;
    ++runs;
  }
  std::string after;
  for (fl::Grad g : fl::kAllGrads) {
    const fl::ErrorStats e = fl::compare_gradient(b, g, problem.grad(g), c.reference->grad32(g));
    after += fl::gradient_failures(b, g, e, fl::pass_tolerance(c.reference->lowp_err(g)));
  }
  if (!after.empty()) {
    state.SkipWithError(("gradients wrong after the timed runs: " + after).c_str());
    return;
  }
  const double tflops = flops * static_cast<double>(runs) / total_s / 1e12;
  c.last_tflops[kernel->number] = tflops;
  const fl::AttnParams& p = b.fwd;
  state.counters["TFLOPS"] = tflops;
  state.counters["kernel"] = kernel->number;
  state.counters["B"] = static_cast<double>(p.batch);
  state.counters["H"] = static_cast<double>(p.heads_q);
  state.counters["N"] = static_cast<double>(p.seqlen_q);
  state.counters["d"] = static_cast<double>(p.head_dim);
  state.counters["causal"] = p.causal ? 1 : 0;
  state.counters["backward"] = 1;
  state.SetLabel(std::string(fl::to_string(p.dtype)) + " backward");
}

// A ladder_decode row: the backward's problem (kept from the last ladder_bwd row) is released
// first, so that the largest decode shapes have the memory; then the forward's run_one.
void run_decode(benchmark::State& state, const fl::KernelInfo* kernel, fl::ProblemSpec spec) {
  BwdCache& b = bwd_cache();
  b.reference.reset();
  b.problem.reset();
  b.key.clear();
  b.verified.clear();
  run_one(state, kernel, spec, 0, true);
}

// The decode rows' shapes (see the top of this file): Nq = 1, d = 128, BNHD.
constexpr int64_t kDecodeHeads[][2] = {{32, 8}, {32, 32}};  // H_q, H_kv
constexpr int64_t kDecodeBatch[] = {1, 8, 64};
constexpr int64_t kDecodeKeys[] = {4096, 32768, 131072};

// The name's type part: "fp16", "bf16", "e4m3" (O fp16), "e4m3-bf16" (O bf16).
std::string type_part(const fl::ProblemSpec& s) {
  std::string t = fl::to_string(s.dtype);
  if (s.dtype == fl::DType::e4m3 && s.out_dtype != fl::DType::f16) {
    t += std::string("-") + fl::to_string(s.out_dtype);
  }
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  const Flags flags = parse_flags(&argc, argv);
  std::string why;
  if (!fl::gpu_available(&why)) {
    std::fprintf(stderr, "ladder_bench: %s; the benchmark needs an NVIDIA GPU.\n", why.c_str());
    return 2;
  }
  benchmark::AddCustomContext("gpu", fl::device_name());

  auto selected = [&](const fl::KernelInfo* k) {
    return flags.kernels.empty() ||
           std::find_if(flags.kernels.begin(), flags.kernels.end(), [&](const std::string& s) {
             return fl::find_kernel(s) == k;
           }) != flags.kernels.end();
  };
  std::vector<const fl::KernelInfo*> kernels, backward_kernels;
  for (const fl::KernelInfo* k : fl::all_kernels()) {
    if (k->op == fl::Op::forward && flags.forward && selected(k)) kernels.push_back(k);
    if (k->op == fl::Op::backward && flags.backward && selected(k)) backward_kernels.push_back(k);
  }
  // Shape-major order, so that each shape's inputs and references are built once.
  for (fl::DType dtype : flags.dtypes) {
    for (bool causal : flags.causal) {
      for (int64_t d : flags.d) {
        for (int64_t n : flags.n) {
          fl::ProblemSpec spec;
          spec.dtype = dtype;
          spec.causal = causal;
          spec.head_dim = d;
          spec.batch = batch_for(n);
          spec.heads_q = spec.heads_kv = 16;
          spec.seqlen_q = spec.seqlen_k = n;
          // The same shape with e4m3 inputs for the fp8 rungs (O in the listed 16-bit type),
          // unless e4m3 is listed itself. The 16-bit rungs first, then the fp8 ones: the cache
          // builds each problem once.
          fl::ProblemSpec spec8 = spec;
          if (dtype != fl::DType::e4m3) {
            spec8.dtype = fl::DType::e4m3;
            spec8.out_dtype = dtype;
          }
          for (bool fp8 : {false, true}) {
            if (fp8 && dtype != fl::DType::e4m3 && flags.e4m3_listed) continue;
            const fl::ProblemSpec& s = fp8 ? spec8 : spec;
            for (const fl::KernelInfo* k : kernels) {
              if (k->fp8_inputs != fp8) continue;
              // Placeholder aligned pointers (and descale factors): supports() looks at sizes,
              // strides, types and flags only.
              if (!fl::why_unsupported(*k, fl::placeholder_params(s)).empty()) continue;
              std::ostringstream name;
              name << "ladder/" << k->name() << "/" << type_part(s) << "/d" << d
                   << (causal ? "/causal" : "") << "/N" << n << "/B" << s.batch;
              benchmark::RegisterBenchmark(name.str().c_str(), run_one, k, s, flags.max_seconds,
                                           false)
                  ->UseManualTime()
                  ->Unit(benchmark::kMillisecond)
                  ->MinTime(0.2)
                  ->Repetitions(3)
                  ->ReportAggregatesOnly(true);
            }
          }
          // The backward rungs on the same shape (16-bit inputs only), after the forward's.
          if (dtype == fl::DType::e4m3) continue;
          for (const fl::KernelInfo* k : backward_kernels) {
            if (!fl::why_unsupported_backward(*k, fl::placeholder_bwd_params(spec, *k)).empty()) {
              continue;
            }
            std::ostringstream name;
            name << "ladder_bwd/" << k->name() << "/" << type_part(spec) << "/d" << d
                 << (causal ? "/causal" : "") << "/N" << n << "/B" << spec.batch;
            benchmark::RegisterBenchmark(name.str().c_str(), run_backward_one, k, spec,
                                         flags.max_seconds)
                ->UseManualTime()
                ->Unit(benchmark::kMillisecond)
                ->MinTime(0.2)
                ->Repetitions(3)
                ->ReportAggregatesOnly(true);
          }
        }
      }
    }
  }
  // The decode rows, after the others: for each shape the highest-numbered selected kernel that
  // takes it, when the tensors fit in the free memory.
  if (flags.forward && flags.decode) {
    size_t free_bytes = 0, total_bytes = 0;
    FL_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    for (fl::DType dtype : flags.dtypes) {
      if (dtype == fl::DType::e4m3) continue;
      for (const auto& heads : kDecodeHeads) {
        for (int64_t b : kDecodeBatch) {
          for (int64_t nk : kDecodeKeys) {
            fl::ProblemSpec spec;
            spec.dtype = dtype;
            spec.head_dim = 128;
            spec.batch = b;
            spec.heads_q = heads[0];
            spec.heads_kv = heads[1];
            spec.seqlen_q = 1;
            spec.seqlen_k = nk;
            spec.layout = fl::Layout::BNHD;
            const fl::AttnParams p = fl::placeholder_params(spec);
            // K and V, Q, and the two outputs verify() compares.
            const double tensors = kv_bytes(p) + 3.0 * static_cast<double>(
                p.batch * p.heads_q * p.seqlen_q * p.head_dim * fl::element_size(p.dtype));
            if (tensors > static_cast<double>(free_bytes)) continue;
            const fl::KernelInfo* best = nullptr;
            for (auto it = kernels.rbegin(); it != kernels.rend() && best == nullptr; ++it) {
              if (!(*it)->fp8_inputs && fl::why_unsupported(**it, p).empty()) best = *it;
            }
            if (best == nullptr) continue;
            std::ostringstream name;
            name << "ladder_decode/" << best->name() << "/" << type_part(spec) << "/d"
                 << spec.head_dim << "/H" << heads[0] << "-" << heads[1] << "/Nq1/Nk" << nk
                 << "/B" << b;
            benchmark::RegisterBenchmark(name.str().c_str(), run_decode, best, spec)
                ->UseManualTime()
                ->Unit(benchmark::kMillisecond)
                ->MinTime(0.2)
                ->Repetitions(3)
                ->ReportAggregatesOnly(true);
          }
        }
      }
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
