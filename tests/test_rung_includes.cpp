// Each rung is a frozen lesson, complete in its own folder: a file under kernels/NN_slug/ may
// include the harness (common/...), the toolkit and the standard library, and files of its own
// folder, but no file of another rung's folder. What several rungs share lives in common/ (the
// config vocabulary, the dispatch and the tuner: common/tune/). This test reads every file under
// kernels/NN_*/ and fails, naming the file and the line, on
//   #include "kernels/MM_slug/..."   where MM_slug is not the file's own folder, and
//   #include "../..."               (or any relative path) that climbs out of the file's folder.
// CPU only: it reads the sources (FL_SOURCE_DIR), not the build.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

const fs::path kSourceDir = FL_SOURCE_DIR;

// The rung folders: kernels/NN_slug (two digits, an underscore).
std::vector<fs::path> rung_dirs() {
  std::vector<fs::path> dirs;
  const std::regex name("[0-9][0-9]_.+");
  for (const auto& e : fs::directory_iterator(kSourceDir / "kernels")) {
    if (e.is_directory() && std::regex_match(e.path().filename().string(), name)) {
      dirs.push_back(e.path());
    }
  }
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

// The includes of one file that break the rule, as "file:line: message".
std::vector<std::string> bad_includes(const fs::path& rung, const fs::path& file) {
  std::vector<std::string> bad;
  // #include "x" or #include <x> (spaces allowed around '#'); a computed include (a macro) has
  // no literal path and is not checked.
  static const std::regex include_re(R"(^\s*#\s*include\s*["<]([^">]+)[">])");
  const std::string own = rung.filename().string();
  const fs::path rel_file = fs::relative(file, kSourceDir);
  std::ifstream in(file);
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    std::smatch m;
    if (!std::regex_search(line, m, include_re)) continue;
    const std::string target = m[1].str();
    const std::string where = rel_file.generic_string() + ":" + std::to_string(number) + ": ";
    if (target.rfind("kernels/", 0) == 0) {
      // kernels/<folder>/...: the folder must be the file's own.
      const std::string rest = target.substr(8);
      const std::string folder = rest.substr(0, rest.find('/'));
      const bool climbs = rest.find("..") != std::string::npos;
      if (folder != own || climbs) {
        bad.push_back(where + "#include \"" + target + "\": a file of " + own +
                      " includes another rung's file (shared code belongs in common/)");
      }
      continue;
    }
    // A relative path with "..": resolved from the file's folder, it must stay in the rung.
    if (target.find("..") != std::string::npos) {
      const fs::path resolved = (file.parent_path() / target).lexically_normal();
      const fs::path inside = resolved.lexically_relative(rung);
      if (inside.empty() || *inside.begin() == "..") {
        bad.push_back(where + "#include \"" + target + "\": climbs out of " + own + " (to " +
                      fs::relative(resolved, kSourceDir).generic_string() +
                      "); include the harness as \"common/...\", never another rung");
      }
    }
  }
  return bad;
}

TEST(RungIncludes, FindsTheRungs) {
  // The walk sees the ladder (a wrong FL_SOURCE_DIR would make the next test pass vacuously).
  const auto dirs = rung_dirs();
  EXPECT_GE(dirs.size(), 17u) << "kernels/NN_* under " << kSourceDir;
  EXPECT_TRUE(fs::exists(kSourceDir / "kernels" / "16_final"));
}

TEST(RungIncludes, NoRungIncludesAnotherRungsFile) {
  int files = 0;
  std::vector<std::string> bad;
  for (const auto& rung : rung_dirs()) {
    std::vector<fs::path> sources;
    for (const auto& e : fs::recursive_directory_iterator(rung)) {
      if (!e.is_regular_file()) continue;
      const std::string ext = e.path().extension().string();
      if (ext == ".h" || ext == ".hpp" || ext == ".cuh" || ext == ".cu" || ext == ".cpp" ||
          ext == ".cc" || ext == ".inc" || ext == ".inl") {
        sources.push_back(e.path());
      }
    }
    std::sort(sources.begin(), sources.end());
    for (const auto& file : sources) {
      ++files;
      for (auto& b : bad_includes(rung, file)) bad.push_back(std::move(b));
    }
  }
  EXPECT_GT(files, 0);
  for (const auto& b : bad) ADD_FAILURE() << b;
}

}  // namespace
