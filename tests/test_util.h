// Helpers shared by the Catch2 tests.
#pragma once

#include <filesystem>
#include <string>

namespace mtnlg::test {

// A fresh directory under the system temp dir, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// Writes `text` to `path` (truncating).
void write_file(const std::string& path, const std::string& text);
std::string read_file(const std::string& path);

// Absolute path of a file in the source tree, e.g. source_path("configs/demo-cpu.yaml").
std::string source_path(const std::string& rel);

}  // namespace mtnlg::test
