// No kernel spills registers, unless its page documents the spill in bytes and why.
//
// The build keeps the ptxas report of every kernel object beside it (<object>.ptxas.txt, written
// by cmake/keep_ptxas_report.sh). This test reads those reports: for every function it finds
// "N bytes spill stores, M bytes spill loads"; a non-zero N or M fails unless the kernel's page
// has a line "Spills: N bytes" with that very number (docs/kernels/NN_*.md).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "common/registry.h"

namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(Spills, EveryKernelHasAReport) {
  for (const fl::KernelInfo* k : fl::all_kernels()) {
    const fs::path dir = fs::path(FL_KERNEL_OBJECT_DIR) / k->name();
    bool found = false;
    if (fs::exists(dir)) {
      for (const auto& e : fs::directory_iterator(dir)) {
        if (e.path().string().size() > 10 &&
            e.path().string().substr(e.path().string().size() - 10) == ".ptxas.txt") {
          found = true;
          EXPECT_NE(read_file(e.path()).find("Function properties"), std::string::npos)
              << e.path() << " holds no ptxas report";
        }
      }
    }
    EXPECT_TRUE(found) << k->name() << ": no ptxas report under " << dir;
  }
}

TEST(Spills, NoKernelSpillsUndocumented) {
  const std::regex props("Function properties for (\\S+)\\s*\\n\\s*(\\d+) bytes stack frame, (\\d+) bytes spill stores, (\\d+) bytes spill loads");
  int functions = 0;
  for (const fl::KernelInfo* k : fl::all_kernels()) {
    const fs::path dir = fs::path(FL_KERNEL_OBJECT_DIR) / k->name();
    if (!fs::exists(dir)) continue;
    const std::string page = read_file(fs::path(FL_SOURCE_DIR) / k->doc);
    for (const auto& e : fs::directory_iterator(dir)) {
      const std::string path = e.path().string();
      if (path.size() < 10 || path.substr(path.size() - 10) != ".ptxas.txt") continue;
      const std::string report = read_file(e.path());
      for (std::sregex_iterator it(report.begin(), report.end(), props), end; it != end; ++it) {
        ++functions;
        const std::string fn = (*it)[1];
        const long stores = std::stol((*it)[3]), loads = std::stol((*it)[4]);
        if (stores == 0 && loads == 0) continue;
        const std::string documented = "Spills: " + std::to_string(std::max(stores, loads)) + " bytes";
        EXPECT_NE(page.find(documented), std::string::npos)
            << k->name() << ": " << fn << " spills " << stores << " bytes (stores) / " << loads
            << " bytes (loads), and " << k->doc << " has no line \"" << documented << "\"";
      }
    }
  }
  EXPECT_GT(functions, 0) << "no function found in any ptxas report";
}

}  // namespace
