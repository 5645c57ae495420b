// The Hopper rungs' GEMMs run on wgmma: in the machine code (SASS) every attention kernel of a
// Hopper rung (17 and up) has at least one HGMMA and not one HMMA. CPU only: it disassembles the
// objects of target fl_kernels_sm90a with `cuobjdump -sass`.
//
// HMMA is the SASS of `mma.sync` (rungs 03-16): one warp multiplies a small tile held in its
// registers. HGMMA is the SASS of `wgmma.mma_async`: a warpgroup (four warps) multiplies a tile
// whose B operand (and A, in the SS form) is read from shared memory through a matrix descriptor,
// issued asynchronously and waited for later (WARPGROUP.ARRIVE before, WARPGROUP.DEPBAR after).
// QGMMA is the same for fp8 inputs (rung 28) and counts as a wgmma here. A Hopper rung whose
// GEMM compiled to HMMA would be rung 16 on a new page: this test says so without a GPU.
// A second test counts rung 27's HGMMA of N = 16: its narrow first visit's S, compiled. A third
// finds rung 47's programmatic dependent launch in its sm_90 code (PREEXIT, ACQBULK), and a
// fourth rung 49's combine of 16 partials a batch against rung 48's of 8, a fifth rung 51's
// combine loading its partials with the LSEs against rung 50's, a sixth rung 52's copy of Q
// without a division a row against rung 51's, a seventh rung 53's block-table loads (once a run
// of 16 keys) against rung 52's (once a row), an eighth the block-wide barriers of the backward
// rungs 45, 54 and 55 (two a step, one, none), a ninth rung 56's divisions by the page size (one
// a block) against rung 53's (one a tile). Rungs 70-72: which decode instances multiply with
// HGMMA, and rung 72's TMA loads (UTMALDG) in place of cp.async (LDGSTS).
//
// cuobjdump is not in every CUDA install; CMake looks for it in the toolkit, on PATH and in the
// pip wheels nvidia-cuda-cuobjdump / nvidia-cuda-nvdisasm (cmake/sass_tools.cmake, FL_CUOBJDUMP),
// and the environment variable FL_CUOBJDUMP overrides that. Without it the test skips and says
// so; without a Hopper rung in the build, too. A rung without objects, or without a function
// whose name holds "attention", fails.
#include <cxxabi.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "build_reports.h"
#include "common/registry.h"

namespace {

namespace fs = std::filesystem;

std::string demangle(const std::string& name) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> d(
      abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status), std::free);
  return status == 0 && d ? std::string(d.get()) : name;
}

// stdout and stderr of a shell command, and its exit status.
std::string run(const std::string& cmd, int* status) {
  std::string out;
  FILE* pipe = popen((cmd + " 2>&1").c_str(), "r");
  if (!pipe) {
    *status = -1;
    return out;
  }
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  *status = pclose(pipe);
  return out;
}

std::string quoted(const std::string& s) {  // for sh: 'it'\''s'
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

struct Counts {
  int gmma = 0;         // HGMMA (fp16/bf16) or QGMMA (fp8): wgmma.mma_async
  int hmma = 0;         // mma.sync
  int tma = 0;          // UTMALDG: cp.async.bulk.tensor, a TMA load
  int ldgsts = 0;       // LDGSTS: cp.async, 16 bytes a thread
  std::map<int, int> n; // HGMMA.64xNx16 by N
};

// Function name -> counts, from `cuobjdump -sass` output. An instruction line looks like
//   /*0270*/   @P0 HGMMA.64x8x16.F32 R24, gdesc[UR12], R24, UP0, gsb0 ;  /* 0x... */
std::map<std::string, Counts> count_sass(const std::string& sass) {
  static const std::regex func(R"(^\s*Function\s*:\s*(\S+))");
  static const std::regex instr(
      R"(^\s*/\*[0-9a-fA-F]{4,}\*/\s+(?:\{\s*)?(?:@!?U?P\w+\s+)?([A-Z0-9_]+)(?:\.64x(\d+)x)?)");
  std::map<std::string, Counts> out;
  Counts* current = nullptr;
  std::istringstream in(sass);
  std::string line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, func)) {
      current = &out[m[1]];
    } else if (current && std::regex_search(line, m, instr)) {
      const std::string op = m[1];
      if (op == "HGMMA" || op == "QGMMA") ++current->gmma;
      if (op == "HGMMA" && m[2].matched) ++current->n[std::stoi(m[2])];
      if (op == "HMMA") ++current->hmma;
      if (op == "UTMALDG") ++current->tma;
      if (op == "LDGSTS") ++current->ldgsts;
    }
  }
  return out;
}

// `cuobjdump -sass` of every object of rung k, one string per object; "" in *skip when it ran,
// else why the test cannot (cuobjdump not found). cuobjdump may call nvdisasm: the one CMake found
// goes first on PATH.
std::vector<std::pair<fs::path, std::string>> sass_of(const fl::KernelInfo& k, std::string* skip) {
  std::vector<std::pair<fs::path, std::string>> out;
  const char* env = std::getenv("FL_CUOBJDUMP");
  const std::string cuobjdump = env && *env ? env : FL_CUOBJDUMP;
  if (cuobjdump.empty() || !fs::exists(cuobjdump)) {
    *skip = "cuobjdump not found (" + (cuobjdump.empty() ? std::string("none") : cuobjdump) +
            "): install it with `python3 -m pip install nvidia-cuda-cuobjdump "
            "nvidia-cuda-nvdisasm` and configure again, or set FL_CUOBJDUMP";
    return out;
  }
  skip->clear();
  std::string path_prefix;
  if (std::string(FL_NVDISASM).size() > 0)
    path_prefix = "PATH=" + quoted(fs::path(FL_NVDISASM).parent_path().string()) + ":\"$PATH\" ";
  for (const auto& obj : fl_test::rung_files(k, ".o")) {
    int status = 0;
    std::string sass =
        run(path_prefix + quoted(cuobjdump) + " -sass " + quoted(obj.string()), &status);
    EXPECT_EQ(status, 0) << "cuobjdump -sass " << obj << " failed:\n" << sass;
    out.emplace_back(obj, std::move(sass));
  }
  return out;
}

TEST(HopperSass, EveryAttentionKernelUsesHgmmaNotHmma) {
  const auto rungs = fl_test::hopper_rungs();
  if (rungs.empty()) GTEST_SKIP() << fl_test::why_no_hopper_rung();
  for (const fl::KernelInfo* k : rungs) {
    // A decode rung on sm_90a (70, 71) keeps rung 69's mma.sync instances beside its wgmma
    // ones: HopperSass.Rung70BlocksOfManyRowsUseHgmmaTheOthersHmma and
    // Rung71BlocksOfManyRowsUseHgmmaAtEveryHeadDim check which is which.
    if (k->kv_cache) continue;
    std::string skip;
    const auto objects = sass_of(*k, &skip);
    if (!skip.empty()) GTEST_SKIP() << skip;
    EXPECT_FALSE(objects.empty())
        << k->name() << ": no object file under " << fl_test::object_dirs_text(*k);
    int kernels = 0;
    std::string seen;
    for (const auto& [obj, sass] : objects) {
      for (const auto& [name, c] : count_sass(sass)) {
        seen += "    " + demangle(name) + "\n";
        // The forward's kernel is attention_kernel, the backward's bwd_main (its pre-pass and
        // conversion of dQ have no GEMM).
        if (name.find(k->op == fl::Op::backward ? "bwd_main" : "attention") == std::string::npos) {
          continue;
        }
        ++kernels;
        std::cout << k->name() << ": " << demangle(name) << ": " << c.gmma << " HGMMA/QGMMA, "
                  << c.hmma << " HMMA\n";
        EXPECT_GT(c.gmma, 0) << k->name() << ": " << demangle(name) << " has no HGMMA (" << obj
                             << ")";
        EXPECT_EQ(c.hmma, 0) << k->name() << ": " << demangle(name) << " has " << c.hmma
                             << " HMMA, the mma.sync path (" << obj << ")";
      }
    }
    EXPECT_GT(kernels, 0) << k->name() << ": no main kernel (attention_kernel / bwd_main) in its "
                          << "objects; cuobjdump showed:\n"
                          << (seen.empty() ? std::string("    (no function)\n") : seen);
  }
}

// Rungs 70 and 71: which decode_kernel instances multiply with wgmma alone (HGMMA, no HMMA: S =
// Q K^T in d / 16 HGMMAs, O += P V in 4) and which are rung 69's mma.sync code (HMMA, no
// HGMMA). `uses_wgmma(d, key_warps)` says which an instance should be; fp16 and bf16, with and
// without the cluster, and d = 64's key warps have two tile sizes: 36 instances in all.
void expect_hgmma_instances(int rung, bool (*uses_wgmma)(int, bool), int wgmma_expected,
                            int others_expected) {
  const fl::KernelInfo* k = nullptr;
  for (const fl::KernelInfo* h : fl_test::hopper_rungs())
    if (h->number == rung) k = h;
  if (k == nullptr) {
    GTEST_SKIP() << "rung " << rung << " is not in this build: " << fl_test::why_no_hopper_rung();
  }
  std::string skip;
  const auto objects = sass_of(*k, &skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  // decode_kernel<T, d, keys a tile, key warps, cluster>
  static const std::regex instance(
      R"(decode_kernel<[^,<>]+, (\d+), (\d+), (true|false), (?:true|false)>)");
  int wgmma = 0, others = 0;
  for (const auto& [obj, sass] : objects) {
    for (const auto& [name, c] : count_sass(sass)) {
      const std::string pretty = demangle(name);
      std::smatch m;
      if (!std::regex_search(pretty, m, instance)) continue;
      const int d = std::stoi(m[1]);
      if (uses_wgmma(d, m[3] == "true")) {
        ++wgmma;
        EXPECT_EQ(c.gmma, d / 16 + 4) << pretty << ": S in d / 16 HGMMAs, P V in 4";
        EXPECT_EQ(c.hmma, 0) << pretty;
      } else {
        ++others;
        EXPECT_EQ(c.gmma, 0) << pretty;
        EXPECT_GT(c.hmma, 0) << pretty;
      }
    }
  }
  EXPECT_EQ(wgmma, wgmma_expected) << "the instances of blocks of more than 16 rows on wgmma";
  EXPECT_EQ(others, others_expected) << "the instances on mma.sync";
}

// Rung 70: blocks of more than 16 rows (no key warps) at d = 64 and 128 on wgmma (8 instances);
// key warps, and d = 96 and 192, on mma.sync (28).
TEST(HopperSass, Rung70BlocksOfManyRowsUseHgmmaTheOthersHmma) {
  expect_hgmma_instances(
      70, [](int d, bool key_warps) { return !key_warps && (d == 64 || d == 128); }, 8, 28);
}

// Rung 71: blocks of more than 16 rows at every head dim on wgmma (16 instances); key warps on
// mma.sync (20).
TEST(HopperSass, Rung71BlocksOfManyRowsUseHgmmaAtEveryHeadDim) {
  expect_hgmma_instances(71, [](int, bool key_warps) { return !key_warps; }, 16, 20);
}

// Rung 72: the same instances on wgmma as rung 71 (16, and 20 on mma.sync).
TEST(HopperSass, Rung72BlocksOfManyRowsStillUseHgmmaAtEveryHeadDim) {
  expect_hgmma_instances(72, [](int, bool key_warps) { return !key_warps; }, 16, 20);
}

// Rung 72: a block of more than 16 rows copies its K/V tiles in one page by TMA. Each of its 16
// instances holds UTMALDG (in whole tiles: d / 64 boxes of K and as many of V a tile, d / 32 at
// d = 96) and fewer LDGSTS than rung 71's same instance (its cp.async copies of Q and of tiles
// in runs across pages remain); the 20 key-warp instances hold no UTMALDG and rung 71's LDGSTS.
TEST(HopperSass, Rung72BlocksOfManyRowsLoadTheirTilesByTma) {
  const fl::KernelInfo* k71 = nullptr;
  const fl::KernelInfo* k72 = nullptr;
  for (const fl::KernelInfo* h : fl_test::hopper_rungs()) {
    if (h->number == 71) k71 = h;
    if (h->number == 72) k72 = h;
  }
  if (k71 == nullptr || k72 == nullptr) {
    GTEST_SKIP() << "rungs 71 and 72 are not both in this build: "
                 << fl_test::why_no_hopper_rung();
  }
  // decode_kernel<T, d, keys a tile, key warps, cluster>, by its template arguments.
  static const std::regex instance(
      R"(decode_kernel<([^,<>]+, (\d+), \d+, (true|false), (?:true|false))>)");
  auto counts = [&](const fl::KernelInfo& k, std::string* skip) {
    std::map<std::string, std::pair<int, Counts>> out;  // arguments -> (d, counts), key warps
    for (const auto& [obj, sass] : sass_of(k, skip)) {
      for (const auto& [name, c] : count_sass(sass)) {
        const std::string pretty = demangle(name);
        std::smatch m;
        if (!std::regex_search(pretty, m, instance)) continue;
        out[m[1]] = {m[3] == "true" ? -std::stoi(m[2]) : std::stoi(m[2]), c};
      }
    }
    return out;
  };
  std::string skip;
  const auto before = counts(*k71, &skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  const auto after = counts(*k72, &skip);
  ASSERT_EQ(after.size(), 36u) << "rung 72's decode_kernel instances";
  int tma = 0, plain = 0;
  for (const auto& [args, dc] : after) {
    SCOPED_TRACE(args);
    const auto it = before.find(args);
    ASSERT_NE(it, before.end()) << "no such instance in rung 71";
    const int d = dc.first;
    const Counts& c = dc.second;
    if (d < 0) {  // key warps
      EXPECT_EQ(c.tma, 0);
      EXPECT_EQ(c.ldgsts, it->second.second.ldgsts);
      ++plain;
      continue;
    }
    const int boxes = 2 * (d % 64 == 0 ? d / 64 : d / 32);  // K's and V's boxes of a tile
    EXPECT_GT(c.tma, 0);
    EXPECT_EQ(c.tma % boxes, 0) << c.tma << " UTMALDG, not whole tiles of " << boxes;
    EXPECT_LT(c.ldgsts, it->second.second.ldgsts);
    ++tma;
  }
  EXPECT_EQ(tma, 16);
  EXPECT_EQ(plain, 20);
}

// Rung 27's narrow first visit (at most 16 keys in the first KV tile an item visits: a length one
// above a tile multiple) issues its S as one wgmma of N = 16 a k-step, d / 16 of them, in each of
// the eight instantiations (fp16, bf16; d = 64, 128, 192, 256; d = 96 runs as 128); a whole
// visit's S has N = Bc (rung 27's notebook, "The narrow first visit's GEMMs again"). With the
// narrow path gone or folded into the whole one, the count is 0.
TEST(HopperSass, Rung23NarrowFirstVisitIsAWgmmaOfSixteenKeys) {
  const fl::KernelInfo* k23 = nullptr;
  for (const fl::KernelInfo* k : fl_test::hopper_rungs())
    if (k->number == 27) k23 = k;
  if (k23 == nullptr)
    GTEST_SKIP() << "rung 27 is not in this build: " << fl_test::why_no_hopper_rung();
  std::string skip;
  const auto objects = sass_of(*k23, &skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  static const std::regex head_dim(R"(attention_kernel<[^,<>]+, (\d+)>)");
  int kernels = 0;
  for (const auto& [obj, sass] : objects) {
    for (const auto& [name, c] : count_sass(sass)) {
      const std::string pretty = demangle(name);
      std::smatch m;
      if (!std::regex_search(pretty, m, head_dim)) continue;
      ++kernels;
      const int d = std::stoi(m[1]);
      const auto it = c.n.find(16);
      EXPECT_EQ(it == c.n.end() ? 0 : it->second, d / 16)
          << pretty << ": HGMMA.64x16x16, the narrow first visit's S (" << obj << ")";
    }
  }
  EXPECT_EQ(kernels, 8)
      << "rung 27's attention_kernel instantiations (fp16, bf16 x d = 64, 128, 192, 256)";
}

// The instructions of each sm_90 kernel of rung k, by demangled name: the SASS of each line, its
// address and encoding cut off.
std::map<std::string, std::vector<std::string>> sm90_instructions(const fl::KernelInfo& k,
                                                                  std::string* skip) {
  static const std::regex arch(R"(^\s*arch\s*=\s*sm_(\d+))");
  static const std::regex func(R"(^\s*Function\s*:\s*(\S+))");
  static const std::regex insn(R"(^\s*/\*[0-9a-f]{4,}\*/\s*(.*?)\s*;)");
  std::map<std::string, std::vector<std::string>> out;
  int arch_now = 0;
  for (const auto& [obj, sass] : sass_of(k, skip)) {
    std::istringstream in(sass);
    std::string line, name;
    std::smatch m;
    while (std::getline(in, line)) {
      if (std::regex_search(line, m, arch)) {
        arch_now = std::stoi(m[1]);
        name.clear();
      } else if (std::regex_search(line, m, func)) {
        name = arch_now == 90 ? demangle(m[1]) : "";
      } else if (!name.empty() && std::regex_search(line, m, insn)) {
        out[name].push_back(m[1]);
      }
    }
  }
  return out;
}

// The rung of this number in the build, or nullptr.
const fl::KernelInfo* rung(int number) {
  for (const fl::KernelInfo* k : fl::all_kernels()) {
    if (k->number == number) return k;
  }
  return nullptr;
}

// For each kernel of `code` whose demangled name `name` matches: its instance (the regex's
// groups joined by ", ", e.g. "__half, 128, 16") and `count` of its instructions.
template <typename Count>
std::map<std::string, int> by_instance(
    const std::map<std::string, std::vector<std::string>>& code, const std::regex& name,
    Count count) {
  std::map<std::string, int> out;
  for (const auto& [fn, insns] : code) {
    std::smatch m;
    if (!std::regex_search(fn, m, name)) continue;
    std::string key = m[1];
    for (size_t g = 2; g < m.size(); ++g) key += ", " + std::string(m[g]);
    out[key] = count(insns);
  }
  return out;
}

// Rung 47 launches its combine as the split kernel's programmatic dependent: on compute
// capability 9.0 the split kernel issues griddepcontrol.launch_dependents (SASS PREEXIT) and the
// combine griddepcontrol.wait (SASS ACQBULK) before its first read of the partials. Without the
// wait the combine, started beside the split kernel, would read partials not yet written, so the
// test fails where either is missing from the sm_90 code, or where rung 46 (launched plainly)
// already has them. The sm_80 code has neither: the instructions are sm_90's, and the host
// launches that code plainly.
TEST(DecodeSass, Rung47SplitKernelLetsTheCombineStartAndTheCombineWaits) {
  const fl::KernelInfo* k46 = rung(46);
  const fl::KernelInfo* k47 = rung(47);
  if (k47 == nullptr) GTEST_SKIP() << "rung 47 is not in this build";
  // Per kernel of a rung's sm_90 code: how many PREEXIT and ACQBULK.
  auto count = [](const fl::KernelInfo& k, std::string* skip) {
    std::map<std::string, std::pair<int, int>> out;
    for (const auto& [name, code] : sm90_instructions(k, skip)) {
      auto& c = out[name];
      for (const std::string& i : code) {
        c.first += i.find("PREEXIT") != std::string::npos;
        c.second += i.find("ACQBULK") != std::string::npos;
      }
    }
    return out;
  };
  std::string skip;
  const auto c47 = count(*k47, &skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  if (c47.empty()) GTEST_SKIP() << "rung 47 has no sm_90 code in this build";
  int split = 0, combine = 0;
  for (const auto& [name, c] : c47) {
    if (name.find("decode_kernel") != std::string::npos) {
      ++split;
      EXPECT_EQ(c.first, 1) << name << ": PREEXIT (griddepcontrol.launch_dependents)";
      EXPECT_EQ(c.second, 0) << name;
    } else if (name.find("combine_kernel") != std::string::npos) {
      ++combine;
      EXPECT_EQ(c.second, 1) << name << ": ACQBULK (griddepcontrol.wait)";
    }
  }
  EXPECT_EQ(split, 8) << "fp16, bf16 x d = 64, 96, 128, 192";
  EXPECT_EQ(combine, 8);
  if (k46 != nullptr) {
    const auto c46 = count(*k46, &skip);
    for (const auto& [name, c] : c46) {
      EXPECT_EQ(c.first + c.second, 0) << "rung 46 launches plainly: " << name;
    }
    EXPECT_EQ(c46.size(), 16u);
  }
}

// The most global loads (LDG) a kernel issues with no FFMA between them: a combine issues a
// batch's loads of partials, then adds them with FFMA, so this is its batch in loads.
int longest_load_run(const std::vector<std::string>& code) {
  int run = 0, most = 0;
  for (const std::string& i : code) {
    if (i.find("LDG") != std::string::npos) {
      most = std::max(most, ++run);
    } else if (i.find("FFMA") != std::string::npos) {
      run = 0;
    }
  }
  return most;
}

// Rung 49's combine comes in two instances: a batch of 8 partials, for rows of 8 splits or
// fewer, which must be rung 48's combine instruction for instruction, and a batch of 16, whose
// loads of partials must be issued together: a run of loads more than 1.5 times the batch of
// 8's. (fp16 with ptxas 13.0: runs of 30, 61, 60 and 96 loads at d = 64, 96, 128 and 192, of the
// 32, 64, 64 and 96 that 16 partials take; the batch of 8's are 14, 32, 28 and 48: the compiler
// moves an add or two ahead of a few loads.) A batch of 16 compiled into two rounds of 8, or a
// batch of 8 that drifted from rung 48's, fails.
TEST(DecodeSass, Rung49CombineIssuesSixteenPartialsLoadsTogether) {
  const fl::KernelInfo* k48 = rung(48);
  const fl::KernelInfo* k49 = rung(49);
  if (k49 == nullptr) GTEST_SKIP() << "rung 49 is not in this build";
  std::string skip;
  const auto c49 = sm90_instructions(*k49, &skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  if (c49.empty()) GTEST_SKIP() << "rung 49 has no sm_90 code in this build";
  std::map<std::string, std::vector<std::string>> c48;
  if (k48 != nullptr) c48 = sm90_instructions(*k48, &skip);
  // "void fl::k49_decode_combine_loads::combine_kernel<__half, 128, 16>(...)" -> "__half, 128".
  static const std::regex name(R"(combine_kernel<(.+), (\d+)>\()");
  std::map<std::string, std::vector<std::string>> by_batch[2], rung48;
  for (const auto& [fn, code] : c49) {
    std::smatch m;
    if (fn.find("combine_kernel") == std::string::npos) continue;
    ASSERT_TRUE(std::regex_search(fn, m, name)) << fn;
    const std::string key = m[1];  // the type and head dim
    const int batch = std::stoi(m[2]);
    ASSERT_TRUE(batch == 8 || batch == 16) << fn;
    by_batch[batch == 16][key] = code;
  }
  for (const auto& [fn, code] : c48) {
    static const std::regex name48(R"(combine_kernel<(.+)>\()");
    std::smatch m;
    if (std::regex_search(fn, m, name48)) rung48[m[1]] = code;
  }
  EXPECT_EQ(by_batch[0].size(), 8u) << "fp16, bf16 x d = 64, 96, 128, 192";
  EXPECT_EQ(by_batch[1].size(), 8u);
  for (const auto& [key, code8] : by_batch[0]) {
    SCOPED_TRACE(key);
    ASSERT_TRUE(by_batch[1].count(key));
    const int run8 = longest_load_run(code8), run16 = longest_load_run(by_batch[1][key]);
    EXPECT_GE(run8, 8) << "a batch of 8 partials";
    EXPECT_GT(2 * run16, 3 * run8) << "the batch of 16 issues its loads together";
    if (k48 != nullptr) {
      ASSERT_TRUE(rung48.count(key)) << "rung 48's combine of the same type and head dim";
      EXPECT_EQ(code8, rung48[key]) << "the batch of 8 is rung 48's combine";
    }
  }
}

// Rung 51's combine issues the loads of its first batch of partials with the LSEs' loads,
// before the reductions (the warp's shuffles): in every instance (fp16, bf16; d = 64-192; a
// batch of 8 and of 16) at least a batch's worth of loads more come before the first SHFL than
// in rung 50's combine of the same instance, whose partials' loads all follow the reductions
// (4 loads before it at d = 128: the LSEs; rung 51's: 36 with a batch of 8, 57 with 16, fp16,
// ptxas 13.0). A combine whose partials' loads sink below the reductions fails.
int loads_before_first_shuffle(const std::vector<std::string>& code) {
  int loads = 0;
  for (const std::string& i : code) {
    if (i.find("SHFL") != std::string::npos) return loads;
    loads += i.find("LDG") != std::string::npos;
  }
  return loads;
}

TEST(DecodeSass, Rung51CombineLoadsPartialsWithTheLSEs) {
  const fl::KernelInfo* k50 = rung(50);
  const fl::KernelInfo* k51 = rung(51);
  if (k51 == nullptr) GTEST_SKIP() << "rung 51 is not in this build";
  std::string skip;
  const auto c51 = sm90_instructions(*k51, &skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  if (c51.empty()) GTEST_SKIP() << "rung 51 has no sm_90 code in this build";
  std::map<std::string, std::vector<std::string>> c50;
  if (k50 != nullptr) c50 = sm90_instructions(*k50, &skip);
  // "void fl::k51_decode_combine_one_trip::combine_kernel<__half, 128, 16>(...)" -> "__half,
  // 128, 16".
  static const std::regex name(R"(combine_kernel<(.+), (\d+)>\()");
  const auto before50 = by_instance(c50, name, loads_before_first_shuffle);
  const auto before51 = by_instance(c51, name, loads_before_first_shuffle);
  int instances = 0;
  for (const auto& [key, before] : before51) {
    const int batch = std::stoi(key.substr(key.rfind(", ") + 2));
    EXPECT_GT(before, batch) << "the LSEs' loads and a batch of partials' before the reductions";
    if (k50 != nullptr) {
      ASSERT_TRUE(before50.count(key)) << "rung 50's combine of the same instance";
      EXPECT_GE(before, before50.at(key) + batch);
    }
    ++instances;
  }
  EXPECT_EQ(instances, 16) << "fp16, bf16 x d = 64, 96, 128, 192 x a batch of 8 and of 16";
}

// Every instance of rung `newer`'s split kernel (fp16, bf16; d = 64, 96, 128, 192; with key warps
// and without: 16) against rung `older`'s of the same instance: `count` of its sm_90
// instructions at least `fewer(rows)` below, where rows = 64 d / 8 / 128 is the number of rows a
// thread copies a tile (4, 6, 8, 12). Skips where either rung or the SASS is missing.
template <typename Count, typename Fewer>
void expect_fewer_in_every_split_kernel(int older, int newer, Count count, Fewer fewer) {
  const fl::KernelInfo* ko = rung(older);
  const fl::KernelInfo* kn = rung(newer);
  if (ko == nullptr || kn == nullptr) {
    GTEST_SKIP() << "rungs " << older << " and " << newer << " are not both built";
  }
  std::string skip;
  const auto cn = sm90_instructions(*kn, &skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  if (cn.empty()) GTEST_SKIP() << "rung " << newer << " has no sm_90 code in this build";
  const auto co = sm90_instructions(*ko, &skip);
  // "void fl::k52_decode_q_rows::decode_kernel<__half, 128, true>(...)" -> "__half, 128, true".
  static const std::regex name(R"(decode_kernel<(.+), (\d+), (true|false)>\()");
  const auto in_older = by_instance(co, name, count);
  int instances = 0;
  for (const auto& [key, n] : by_instance(cn, name, count)) {
    // The head dim: the number after the type ("__half, 128, true").
    const int d = std::stoi(key.substr(key.find(", ") + 2)), rows = 64 * d / 8 / 128;
    SCOPED_TRACE(key);
    ASSERT_TRUE(in_older.count(key)) << "rung " << older << "'s split kernel of the same instance";
    EXPECT_LE(n, in_older.at(key) - fewer(rows));
    ++instances;
  }
  EXPECT_EQ(instances, 16) << "fp16, bf16 x d = 64, 96, 128, 192 x key warps or not";
}

// Rung 52 copies the packed Q tile stepping (s, i) = (r / g, r % g) from row to row, where rung
// 51 divided each of a thread's rows by g (known only at run time): one integer division a row
// (4, 6, 8, 12 rows a thread at d = 64, 96, 128, 192), against two in all (the thread's first
// row, and the step). In SASS an integer division by a register starts with the
// reciprocal of the divisor converted to float (I2F.RP or I2F.U32.RP); in every instance rung
// 52 has at least rows - 2 fewer than rung 51's. A rung 52 that divided a row at a time again
// fails.
int integer_divisions(const std::vector<std::string>& code) {
  int n = 0;
  for (const std::string& i : code) {
    n += i.find("I2F.RP") != std::string::npos || i.find("I2F.U32.RP") != std::string::npos;
  }
  return n;
}

TEST(DecodeSass, Rung52CopiesQWithoutADivisionARow) {
  expect_fewer_in_every_split_kernel(51, 52, integer_divisions, [](int rows) { return rows - 2; });
}

// Rung 53 finds a tile's rows, where pages are smaller than a tile, through four runs of 16
// keys: four block-table loads a tile, where rung 52 loaded a row's entry for each of a thread's
// rows, for K and again for V. The table loads are the split kernel's plain global loads (LDG;
// the K/V copies are LDGSTS): in every instance rung 53 has at least 2 x rows - 4 fewer than
// rung 52's, one tile's saving. A rung 53 that read the table a row at a time again fails.
int table_loads(const std::vector<std::string>& code) {
  static const std::regex ldg(R"(\bLDG\.)");
  int n = 0;
  for (const std::string& i : code) n += std::regex_search(i, ldg);
  return n;
}

TEST(DecodeSass, Rung53ReadsTheTableOnceARun) {
  expect_fewer_in_every_split_kernel(52, 53, table_loads, [](int rows) { return 2 * rows - 4; });
}

// Rung 56 divides by the page size once a block, for its split's first key, and moves a cursor
// from tile to tile; rung 53 divided each tile's first key, in each place the tile copy is
// inlined (the prologue's S - 1 tiles and the loop's, S = 3 or 4 stages) and on both of its
// paths (whole-tile pages and runs): 2 S divisions against one, at least 5 fewer in every
// instance (integer_divisions, above). A rung 56 that divided at every tile on either path
// again fails.
TEST(DecodeSass, Rung56DividesByThePageSizeOnceABlock) {
  expect_fewer_in_every_split_kernel(53, 56, integer_divisions, [](int) { return 5; });
}

// The instances of a backward rung's main kernel (fp16, bf16 x d = 64, 128, 256) in its sm_90
// code, each with how many of its instructions hold `op`.
std::map<std::string, int> in_every_bwd_main(int number, const std::string& op,
                                             std::string* skip) {
  const fl::KernelInfo* k = rung(number);
  if (k == nullptr) {
    *skip = "rung " + std::to_string(number) + " is not in this build";
    return {};
  }
  const auto code = sm90_instructions(*k, skip);
  if (!skip->empty()) return {};
  if (code.empty()) *skip = "rung " + std::to_string(number) + " has no sm_90 code in this build";
  // "void fl::k55_bwd_split_barrier::bwd_main<__half, 128>(...)" -> "__half, 128".
  static const std::regex name(R"(bwd_main<(.+), (\d+)>\()");
  return by_instance(code, name, [&](const std::vector<std::string>& insns) {
    int n = 0;
    for (const std::string& i : insns) n += i.find(op) != std::string::npos;
    return n;
  });
}

// A __syncthreads() is a BAR.SYNC in SASS. Rung 45 has two a step; rung 54 keeps one a step
// (after the stores of Pᵀ and dSᵀ) and waits for its copies on mbarriers (SYNCS.PHASECHK), with
// one more barrier before the loop, after the mbarriers' setup: two in all. Rung 55 splits the
// step's barrier into an mbarrier arrive (SYNCS.ARRIVE) and a wait: the setup's is its only
// BAR.SYNC. A rung 54 that waited at the top of the step again, or a rung 55 with a block-wide
// barrier in its loop, fails.
TEST(BackwardSass, Rung54And55BarriersAStep) {
  struct Expect {
    int rung, bars;
    const char* must_have;  // an instruction every instance has, or ""
  };
  for (const Expect& e : {Expect{45, 2, ""}, Expect{54, 2, "SYNCS.PHASECHK"},
                          Expect{55, 1, "SYNCS.ARRIVE"}}) {
    SCOPED_TRACE("rung " + std::to_string(e.rung));
    std::string skip;
    const auto bars = in_every_bwd_main(e.rung, "BAR.SYNC", &skip);
    if (!skip.empty()) GTEST_SKIP() << skip;
    EXPECT_EQ(bars.size(), 6u) << "fp16, bf16 x d = 64, 128, 256";
    for (const auto& [key, n] : bars) EXPECT_EQ(n, e.bars) << key;
    if (*e.must_have == '\0') continue;
    for (const auto& [key, n] : in_every_bwd_main(e.rung, e.must_have, &skip)) {
      EXPECT_GE(n, 1) << key << ": " << e.must_have;
    }
  }
}

}  // namespace
