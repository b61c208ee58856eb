#include "parallel/file_store.h"

#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "core/status.h"
#include "parallel/gloo_communicator.h"
#include "parallel/runtime.h"
#include "test_util.h"

namespace mtnlg {
namespace {

using std::chrono::milliseconds;
using test::TempDir;
namespace fs = std::filesystem;

TEST_CASE("FileStore get returns what set wrote and waits for a value set by another thread") {
  TempDir dir;
  FileStore a(dir.path().string()),
      b(dir.path().string());  // two processes' views of one directory
  a.set("gloo/tensor.0x2/1@3", {1, 2, 3});
  CHECK(b.get("gloo/tensor.0x2/1@3", milliseconds(10)) == std::vector<uint8_t>{1, 2, 3});
  a.set("empty", {});
  CHECK(b.get("empty", milliseconds(10)).empty());
  std::vector<uint8_t> big(100000);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 7);
  std::thread setter([&] {
    std::this_thread::sleep_for(milliseconds(50));
    a.set("late", big);
  });
  const auto got = b.get("late", milliseconds(10000));
  setter.join();
  CHECK(got == big);
  b.wait({"late", "empty"}, milliseconds(10));
  // No temporary file is left behind; every key is one file.
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir.path().string())) {
    CHECK(e.path().filename().string()[0] != '.');
    ++files;
  }
  CHECK(files == 3);
}

TEST_CASE("FileStore names keys as files without path separators") {
  TempDir outer;
  const std::string dir = outer.path().string() + "/store";
  fs::create_directory(dir);
  FileStore store(dir);
  CHECK(store.path_of("nccl/world.0x8.0/unique_id@0") == dir + "/nccl%2Fworld.0x8.0%2Funique_id@0");
  CHECK(store.path_of("../x") == dir + "/%2E.%2Fx");
  CHECK(store.path_of("a b") == dir + "/a%20b");
  store.set("../x", {9});
  CHECK(fs::exists(dir + "/%2E.%2Fx"));
  CHECK(!fs::exists(outer.path().string() + "/x"));
}

TEST_CASE("FileStore get times out naming the key, its file and the directory variable") {
  TempDir dir;
  FileStore store(dir.path().string());
  REQUIRE_THROWS_WITH(store.get("absent", milliseconds(30)),
                      Catch::Contains("'absent'") && Catch::Contains("/absent'") &&
                          Catch::Contains("MTNLG_STORE_DIR"));
}

TEST_CASE("FileStore refuses a directory that holds an earlier job's key") {
  TempDir dir;
  FileStore first(dir.path().string());
  first.set("runtime/hello@0", {1});
  FileStore second(dir.path().string());  // the next job on the same directory
  try {
    second.set("runtime/hello@0", {2});
    FAIL("a key set twice must be an error");
  } catch (const Error& e) {
    CHECK(e.code() == Code::kIOError);
    CHECK_THAT(e.message(), Catch::Contains(dir.path().string()) &&
                                Catch::Contains("earlier job") &&
                                Catch::Contains("empty MTNLG_STORE_DIR"));
  }
  CHECK(second.get("runtime/hello@0", milliseconds(10)) == std::vector<uint8_t>{1});
}

// A launcher of one's own may leave the other ranks running when one fails: the failed rank's
// key "failed@<rank>" stops a rank waiting for that rank's keys at once, naming it.
TEST_CASE("FileStore get stops at once when the key's rank has failed - naming it") {
  TempDir dir;
  FileStore waiter(dir.path().string()), failed(dir.path().string());
  failed.publish_failure(1, "on host node7, pid 42");
  CHECK(fs::exists(failed.path_of("failed@1")));
  const auto start = std::chrono::steady_clock::now();
  try {
    waiter.get("gloo/world.0x2.0/addr@1", milliseconds(60000));
    FAIL("a key of a failed rank must be an error");
  } catch (const Error& e) {
    CHECK(e.code() == Code::kIOError);
    CHECK_THAT(e.message(), Catch::Contains("rank 1 stopped with an error") &&
                                Catch::Contains("'gloo/world.0x2.0/addr@1'") &&
                                Catch::Contains("on host node7, pid 42"));
  }
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
  // A key another rank sets still waits for it (here: times out as before); one set already is
  // read whoever failed.
  REQUIRE_THROWS_WITH(waiter.get("addr@2", milliseconds(30)), Catch::Contains("timed out"));
  waiter.set("addr@3", {5});
  failed.publish_failure(3, "later");
  CHECK(waiter.get("addr@3", milliseconds(10)) == std::vector<uint8_t>{5});
  // Keys without a rank are rank 0's.
  failed.publish_failure(0, "x");
  REQUIRE_THROWS_WITH(waiter.get("unique_id", milliseconds(60000)),
                      Catch::Contains("rank 0 stopped with an error"));
  // Best effort: a second report of the same rank is not an error.
  failed.publish_failure(1, "again");
}

TEST_CASE("FileStore refuses a missing or unwritable directory naming it") {
  REQUIRE_THROWS_WITH(
      FileStore("/nonexistent/mtnlg-store"),
      Catch::Contains("'/nonexistent/mtnlg-store'") && Catch::Contains("MTNLG_STORE_DIR"));
  TempDir dir;
  const std::string file = dir.path().string() + "/plain";
  std::ofstream(file) << "x";
  REQUIRE_THROWS_WITH(FileStore(file), Catch::Contains("not a writable directory"));
}

TEST_CASE("Gloo groups meet through a FileStore") {
  TempDir dir;
  FileStore s0(dir.path().string()), s1(dir.path().string());
  std::unique_ptr<Communicator> c1;
  std::thread peer([&] {
    c1 = make_gloo_communicator(s1, "world", 1, {0, 1}, milliseconds(20000));
  });
  auto c0 = make_gloo_communicator(s0, "world", 0, {0, 1}, milliseconds(20000));
  peer.join();
  Tensor a = Tensor::cpu({2}, DType::kF32), b = Tensor::cpu({2}, DType::kF32);
  a.data_as<float>()[0] = 1, a.data_as<float>()[1] = 2;
  b.data_as<float>()[0] = 10, b.data_as<float>()[1] = 20;
  std::thread reduce([&] { c1->all_reduce(b, ReduceOp::kSum); });
  c0->all_reduce(a, ReduceOp::kSum);
  reduce.join();
  CHECK(a.data_as<float>()[1] == 22.0f);
  CHECK(b.data_as<float>()[0] == 11.0f);
  // Closing is collective (a barrier): both at once, as two processes would, not one after the
  // other on this thread (the first would wait out its timeout for the second).
  std::thread close([&] { c1.reset(); });
  c0.reset();
  close.join();
}

// Sets (or unsets, nullptr) the environment launch's variables for one test.
struct EnvLaunch {
  explicit EnvLaunch(std::vector<std::pair<const char*, const char*>> vars)
      : vars_(std::move(vars)) {
    for (const auto& [k, v] : vars_) v ? ::setenv(k, v, 1) : ::unsetenv(k);
  }
  ~EnvLaunch() {
    for (const auto& [k, v] : vars_) ::unsetenv(k);
  }
  std::vector<std::pair<const char*, const char*>> vars_;
};

TEST_CASE("Runtime init reads the environment launch") {
  REQUIRE(std::getenv("PMIX_NAMESPACE") == nullptr);
  TempDir dir;
  {
    EnvLaunch env({{"MTNLG_WORLD_SIZE", "8"},
                   {"MTNLG_RANK", "5"},
                   {"MTNLG_LOCAL_RANK", "1"},
                   {"MTNLG_LOCAL_WORLD_SIZE", "4"},
                   {"MTNLG_NODE", "1"},
                   {"MTNLG_STORE_DIR", dir.path().c_str()}});
    Runtime rt = Runtime::init();
    CHECK(rt.rank == 5);
    CHECK(rt.world == 8);
    CHECK(rt.local_rank == 1);
    CHECK(rt.local_world == 4);
    CHECK(rt.node == 1);
    CHECK(!rt.under_pmix());
    CHECK_THAT(rt.describe(), Catch::Contains("rank 5 of 8 (local 1 of 4, node 1)") &&
                                  Catch::Contains("MTNLG_STORE_DIR"));
    rt.store->set("k", {4});
    CHECK(FileStore(dir.path().string()).get("k", milliseconds(10)) == std::vector<uint8_t>{4});
    // Its process key, for the other ranks' PeerWatch: host, pid namespace, pid.
    const auto process = FileStore(dir.path().string()).get("process@5", milliseconds(10));
    CHECK_THAT(std::string(process.begin(), process.end()),
               Catch::EndsWith(std::to_string(::getpid())));
  }
  {
    // On one node by default: local rank and world are the rank and the world.
    EnvLaunch env(
        {{"MTNLG_WORLD_SIZE", "2"}, {"MTNLG_RANK", "1"}, {"MTNLG_STORE_DIR", dir.path().c_str()}});
    Runtime rt = Runtime::init();
    CHECK(rt.local_rank == 1);
    CHECK(rt.local_world == 2);
    CHECK(rt.node == 0);
  }
}

TEST_CASE("Runtime init names the environment variable that is wrong") {
  TempDir dir;
  const char* d = dir.path().c_str();
  const std::vector<std::pair<std::vector<std::pair<const char*, const char*>>, const char*>>
      cases = {
          {{{"MTNLG_WORLD_SIZE", "2"}, {"MTNLG_STORE_DIR", d}}, "MTNLG_RANK is not"},
          {{{"MTNLG_WORLD_SIZE", "2"}, {"MTNLG_RANK", "2"}, {"MTNLG_STORE_DIR", d}},
           "MTNLG_RANK=2 is outside a world of 2"},
          {{{"MTNLG_WORLD_SIZE", "two"}, {"MTNLG_RANK", "0"}, {"MTNLG_STORE_DIR", d}},
           "MTNLG_WORLD_SIZE=two is not a non-negative integer"},
          {{{"MTNLG_WORLD_SIZE", "2"}, {"MTNLG_RANK", "-1"}, {"MTNLG_STORE_DIR", d}},
           "MTNLG_RANK=-1 is not a non-negative integer"},
          {{{"MTNLG_WORLD_SIZE", "2"}, {"MTNLG_RANK", "0"}}, "MTNLG_STORE_DIR is not"},
          {{{"MTNLG_WORLD_SIZE", "2"},
            {"MTNLG_RANK", "0"},
            {"MTNLG_LOCAL_RANK", "3"},
            {"MTNLG_LOCAL_WORLD_SIZE", "2"},
            {"MTNLG_STORE_DIR", d}},
           "MTNLG_LOCAL_RANK=3 is outside MTNLG_LOCAL_WORLD_SIZE=2"},
      };
  for (const auto& [vars, message] : cases) {
    EnvLaunch env(vars);
    INFO(message);
    REQUIRE_THROWS_WITH(Runtime::init(), Catch::Contains(message));
  }
}

// A rank failing after the launch, even before its groups are connected, says so through the
// store as its Runtime goes; one that ends normally says nothing.
TEST_CASE("Runtime left by an exception publishes its rank's failure - not on a normal end") {
  REQUIRE(std::getenv("PMIX_NAMESPACE") == nullptr);
  TempDir dir;
  {
    EnvLaunch env(
        {{"MTNLG_WORLD_SIZE", "2"}, {"MTNLG_RANK", "0"}, {"MTNLG_STORE_DIR", dir.path().c_str()}});
    Runtime rt = Runtime::init();
    Runtime moved = std::move(rt);  // the Job holds it so
  }
  CHECK_FALSE(fs::exists(FileStore(dir.path().string()).path_of("failed@0")));
  {
    EnvLaunch env(
        {{"MTNLG_WORLD_SIZE", "2"}, {"MTNLG_RANK", "1"}, {"MTNLG_STORE_DIR", dir.path().c_str()}});
    try {
      Runtime rt = Runtime::init();
      Runtime moved = std::move(rt);
      throw std::runtime_error("the device is missing");
    } catch (const std::runtime_error&) {
    }
  }
  FileStore store(dir.path().string());
  REQUIRE(fs::exists(store.path_of("failed@1")));
  REQUIRE_THROWS_WITH(store.get("addr@1", milliseconds(60000)),
                      Catch::Contains("rank 1 stopped with an error") && Catch::Contains("pid"));
}

}  // namespace
}  // namespace mtnlg
