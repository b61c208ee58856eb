// Helpers shared by the Catch2 tests.
#pragma once

#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

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

// Runs fn(rank) for rank 0..n-1 on n threads (the ranks of an in-process multi-rank test, e.g.
// Gloo communicators over one MemoryStore), joins them all, then rethrows the first rank's
// exception. fn must not use Catch's macros (they are not thread-safe): throw instead.
void run_ranks(int n, const std::function<void(int)>& fn);

// Ends the test process (exit 1, naming `what`) if it is still alive `seconds` after construction:
// a hang in a destructor or join then fails within the test instead of at CTest's timeout, and
// says where. Destroy it when the guarded work is done.
class Watchdog {
 public:
  Watchdog(double seconds, std::string what);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;  // guarded by mu_
  std::thread thread_;
};

// Sets an environment variable for a scope (MTNLG_CUDA_ATTENTION and the other switches), and
// unsets it after.
class ScopedEnv {
 public:
  ScopedEnv(std::string name, const std::string& value) : name_(std::move(name)) {
    ::setenv(name_.c_str(), value.c_str(), 1);
  }
  ~ScopedEnv() { ::unsetenv(name_.c_str()); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
};

// Ends this test case as skipped: exit 77, CTest's SKIP_RETURN_CODE for every Catch2 test (the
// main exits 1 on any failure, so 77 means a skip only). For a test of a capability this CPU
// lacks (ask the backend what it does); such a test must never report passed. Each CTest test
// runs one TEST_CASE, so the rest of the executable's cases still run.
[[noreturn]] void skip_test(const std::string& why);

// Absolute path of a file in the source tree, e.g. source_path("configs/demo-cpu.yaml").
std::string source_path(const std::string& rel);

}  // namespace mtnlg::test
