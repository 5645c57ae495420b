// Where the build keeps each rung's objects and their ptxas reports (cmake/keep_ptxas_report.sh
// writes <object>.ptxas.txt beside each object): rungs 00-16 and the late rungs built for sm_80
// and up (FL_SM80_LATE_RUNGS: the backward's 29-32, the serving track's 37) under
// FL_KERNEL_OBJECT_DIR (target fl_kernels), the Hopper rungs (17 and up, sm_90a only, less
// those) under FL_HOPPER_OBJECT_DIR (target fl_kernels_sm90a). All three are defined by
// tests/CMakeLists.txt.
#pragma once

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/registry.h"

namespace fl_test {

namespace fs = std::filesystem;

inline std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The object directories a rung's files may be in, e.g. .../fl_kernels.dir/kernels/08_double_buffer.
inline std::vector<fs::path> object_dirs(const fl::KernelInfo& k) {
  return {fs::path(FL_KERNEL_OBJECT_DIR) / k.name(), fs::path(FL_HOPPER_OBJECT_DIR) / k.name()};
}

// The rung's files whose names end in `suffix` (".ptxas.txt", ".o"), sorted, from every object dir.
inline std::vector<fs::path> rung_files(const fl::KernelInfo& k, const std::string& suffix) {
  std::vector<fs::path> out;
  for (const fs::path& dir : object_dirs(k)) {
    if (!fs::is_directory(dir)) continue;
    for (const auto& e : fs::directory_iterator(dir)) {
      const std::string s = e.path().filename().string();
      if (s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0)
        out.push_back(e.path());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Both directories in one line, for failure messages.
inline std::string object_dirs_text(const fl::KernelInfo& k) {
  const std::vector<fs::path> d = object_dirs(k);
  return d[0].string() + " or " + d[1].string();
}

// True for a rung numbered after the Hopper track's start but built for sm_80 and up (a backward
// or serving rung on mma.sync), as the top-level CMakeLists.txt sorts the folders.
// FL_SM80_LATE_RUNGS is the CMake list as a string of numbers, "29 30 31 32 37 38 39".
inline bool is_sm80_late_rung(int number) {
  std::istringstream in(FL_SM80_LATE_RUNGS);
  for (int n; in >> n;)
    if (n == number) return true;
  return false;
}

// The Hopper rungs (number >= FL_HOPPER_FIRST_RUNG, sm_90a only) that this build holds.
inline std::vector<const fl::KernelInfo*> hopper_rungs() {
  std::vector<const fl::KernelInfo*> out;
  for (const fl::KernelInfo* k : fl::all_kernels())
    if (k->number >= FL_HOPPER_FIRST_RUNG && !is_sm80_late_rung(k->number)) out.push_back(k);
  return out;
}

// Why a build holds no Hopper rung (for GTEST_SKIP).
inline std::string why_no_hopper_rung() {
  if (!FL_HOPPER_ENABLED) return std::string("the Hopper rungs are not built: ") + FL_HOPPER_WHY_NOT;
  return "this build holds no Hopper rung (no kernels/NN_* folder with NN >= " +
         std::to_string(FL_HOPPER_FIRST_RUNG) + ", or FL_KERNELS leaves them out)";
}

}  // namespace fl_test
