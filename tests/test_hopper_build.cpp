// The Hopper rungs (17 and up) compile clean: no spill at all, no serialised wgmma, no ignored
// setmaxnreg. CPU only: it reads the ptxas report kept beside every object
// (cmake/keep_ptxas_report.sh; the objects of target fl_kernels_sm90a, tests/build_reports.h).
//
// A wgmma kernel that ptxas had to compromise on still compiles, runs and gives right answers; it
// is only slower, and ptxas says so in an "info" line with a number, which scrolls past. nvcc 13.0
// prints, for instance:
//
//   ptxas info    : (C7511) Potential Performance Loss: wgmma.mma_async instructions are serialized
//                   due to insufficient register resources for the wgmma pipeline in the function '...'
//   ptxas info    : (C7508) Potential Performance Loss: 'setmaxnreg' ignored; unable to determine
//                   register count at entry.
//
// (the serialisation notes are a family, C7510 and up, one number per cause). Here each is a
// failure, matched loosely (a line with "wgmma" and "serializ"; a line with "setmaxnreg"), and so
// is any spill: unlike rungs 01-16, no Hopper rung may spill, documented or not. A missing report
// fails too. With no Hopper rung in the build the tests skip and say why.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <iostream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "build_reports.h"
#include "common/registry.h"

namespace {

using fl_test::read_file;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

struct Report {
  const fl::KernelInfo* kernel;
  std::string path;
  std::string text;
};

// Every report of these rungs; a rung without one is a failure (no rung passes vacuously).
std::vector<Report> reports_of(const std::vector<const fl::KernelInfo*>& rungs) {
  std::vector<Report> out;
  for (const fl::KernelInfo* k : rungs) {
    const auto paths = fl_test::rung_files(*k, ".ptxas.txt");
    EXPECT_FALSE(paths.empty())
        << k->name() << ": no ptxas report under " << fl_test::object_dirs_text(*k);
    for (const auto& p : paths) out.push_back({k, p.string(), read_file(p)});
  }
  return out;
}

// The Hopper rungs' reports; the test skips (and says why) only when the build holds no Hopper rung.
#define HOPPER_REPORTS_OR_SKIP(reports)                                  \
  const auto rungs_ = fl_test::hopper_rungs();                           \
  if (rungs_.empty()) GTEST_SKIP() << fl_test::why_no_hopper_rung();     \
  const std::vector<Report> reports = reports_of(rungs_)

// The lines of `text` that `pred` picks, each on its own line, indented.
template <class Pred>
std::string lines_where(const std::string& text, Pred pred) {
  std::istringstream in(text);
  std::string line, out;
  while (std::getline(in, line))
    if (pred(lower(line))) out += "    " + line + "\n";
  return out;
}

TEST(HopperBuild, EveryRungHasAReport) {
  HOPPER_REPORTS_OR_SKIP(reports);
  for (const Report& r : reports)
    EXPECT_NE(r.text.find("Function properties"), std::string::npos)
        << r.kernel->name() << ": " << r.path << " holds no ptxas report";
}

TEST(HopperBuild, NoSpillsAtAll) {
  HOPPER_REPORTS_OR_SKIP(reports);
  const std::regex props("Function properties for (\\S+)\\s*\\n\\s*(\\d+) bytes stack frame, (\\d+) bytes spill stores, (\\d+) bytes spill loads");
  for (const Report& r : reports) {
    int functions = 0;
    for (std::sregex_iterator it(r.text.begin(), r.text.end(), props), end; it != end; ++it) {
      ++functions;
      EXPECT_TRUE((*it)[3] == "0" && (*it)[4] == "0")
          << r.kernel->name() << ": " << (*it)[1] << " spills " << (*it)[3]
          << " bytes (stores) / " << (*it)[4] << " bytes (loads); a Hopper rung may not spill ("
          << r.path << ")";
    }
    EXPECT_GT(functions, 0) << r.kernel->name() << ": no function in " << r.path;
  }
}

TEST(HopperBuild, NoSerializedWgmma) {
  HOPPER_REPORTS_OR_SKIP(reports);
  for (const Report& r : reports) {
    const std::string bad = lines_where(r.text, [](const std::string& l) {
      return l.find("wgmma") != std::string::npos && l.find("serializ") != std::string::npos;
    });
    EXPECT_EQ(bad, "") << r.kernel->name() << ": ptxas serialised wgmma (" << r.path << "):\n"
                       << bad;
    // Not a failure, but worth seeing: a wait that ptxas added because registers written by a
    // wgmma were used before the kernel's own wgmma.wait_group covered them.
    const std::string injected = lines_where(r.text, [](const std::string& l) {
      return l.find("is injected") != std::string::npos;
    });
    if (!injected.empty()) std::cout << "note: " << r.kernel->name() << ":\n" << injected;
  }
}

TEST(HopperBuild, NoIgnoredSetmaxnreg) {
  HOPPER_REPORTS_OR_SKIP(reports);
  for (const Report& r : reports) {
    const std::string bad = lines_where(r.text, [](const std::string& l) {
      return l.find("setmaxnreg") != std::string::npos;
    });
    EXPECT_EQ(bad, "") << r.kernel->name() << ": ptxas on setmaxnreg (" << r.path << "):\n"
                       << bad;
  }
}

}  // namespace
