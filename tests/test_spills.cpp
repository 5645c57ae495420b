// No kernel spills registers, unless its page documents the spill in bytes and why.
//
// The build keeps the ptxas report of every kernel object beside it (<object>.ptxas.txt, written
// by cmake/keep_ptxas_report.sh). This test reads those reports: for every function it finds
// "N bytes spill stores, M bytes spill loads"; a non-zero N or M fails unless the kernel's page
// has a line "Spills: N bytes" with that very number (docs/kernels/NN_*.md). The Hopper rungs
// (17 and up) are held to more, with no exception: tests/test_hopper_build.cpp.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "common/registry.h"
#include "build_reports.h"

namespace {

using fl_test::read_file;
using fl_test::rung_files;

TEST(Spills, EveryKernelHasAReport) {
  for (const fl::KernelInfo* k : fl::all_kernels()) {
    const auto reports = rung_files(*k, ".ptxas.txt");
    for (const auto& p : reports)
      EXPECT_NE(read_file(p).find("Function properties"), std::string::npos)
          << p << " holds no ptxas report";
    EXPECT_FALSE(reports.empty())
        << k->name() << ": no ptxas report under " << fl_test::object_dirs_text(*k);
  }
}

TEST(Spills, NoKernelSpillsUndocumented) {
  const std::regex props("Function properties for (\\S+)\\s*\\n\\s*(\\d+) bytes stack frame, (\\d+) bytes spill stores, (\\d+) bytes spill loads");
  int functions = 0;
  for (const fl::KernelInfo* k : fl::all_kernels()) {
    const std::string page = read_file(std::string(FL_SOURCE_DIR) + "/" + k->doc);
    for (const auto& p : rung_files(*k, ".ptxas.txt")) {
      const std::string report = read_file(p);
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
