// The checkpoint root: names, finding the checkpoint a path means, cleaning up after an
// interrupted save (stale temporaries, a commit that died before the latest file), keep_last.
#include <catch2/catch.hpp>

#include <filesystem>

#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/manifest.h"
#include "core/status.h"
#include "test_util.h"

using namespace mtnlg;
namespace fs = std::filesystem;

namespace {

// A committed-looking checkpoint directory (a manifest is what makes it committed).
void make_committed(const test::TempDir& d, int64_t it) {
  const fs::path dir = d.path() / iteration_dir_name(it);
  fs::create_directories(dir);
  test::write_file((dir / kManifestFile).string(), "{}");
}

Code code_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.code();
  }
  FAIL("no error");
  return Code::kInternal;
}

}  // namespace

TEST_CASE("iteration directories have Megatron's seven-digit names") {
  CHECK(iteration_dir_name(100) == "iter_0000100");
  CHECK(iteration_dir_name(0) == "iter_0000000");
  CHECK(iteration_dir_name(12345678) == "iter_12345678");
}

TEST_CASE("find_checkpoint: a root means its latest committed checkpoint - an iter dir itself") {
  test::TempDir d;
  CHECK_FALSE(find_checkpoint(d.file("missing")).has_value());
  CHECK_FALSE(find_checkpoint(d.path().string()).has_value());  // empty root
  make_committed(d, 10);
  make_committed(d, 20);
  // Without a latest file the newest committed one.
  CHECK(find_checkpoint(d.path().string()) == d.file("iter_0000020"));
  test::write_file(d.file(kLatestFile), "10\n");
  CHECK(find_checkpoint(d.path().string()) == d.file("iter_0000010"));
  CHECK(find_checkpoint(d.file("iter_0000020")) == d.file("iter_0000020"));
  SECTION("a latest file naming a missing checkpoint is an error naming it") {
    test::write_file(d.file(kLatestFile), "30\n");
    CHECK(code_of([&] { find_checkpoint(d.path().string()); }) == Code::kNotFound);
  }
  SECTION("a latest file that is not a number is corruption") {
    test::write_file(d.file(kLatestFile), "abc\n");
    CHECK(code_of([&] { find_checkpoint(d.path().string()); }) == Code::kCorruption);
  }
  SECTION("an uncommitted iter directory is not a checkpoint") {
    fs::create_directories(d.path() / "iter_0000040");
    CHECK(code_of([&] { find_checkpoint(d.file("iter_0000040")); }) == Code::kNotFound);
  }
  SECTION("a file is not a checkpoint path") {
    test::write_file(d.file("f"), "x");
    CHECK(code_of([&] { find_checkpoint(d.file("f")); }) == Code::kIOError);
  }
}

TEST_CASE("prepare_root removes stale temporaries and finishes an interrupted commit") {
  test::TempDir d;
  make_committed(d, 10);
  test::write_file(d.file(kLatestFile), "10\n");
  fs::create_directories(d.path() / "iter_0000015.tmp");
  test::write_file(d.file("iter_0000015.tmp/model_tp00_pp000.safetensors"), "partial");
  fs::create_directories(d.path() / ".deleting.iter_0000005");
  test::write_file(d.file(std::string(kLatestFile) + ".tmp"), "15");
  make_committed(d, 20);  // renamed, but the latest file was not replaced yet
  std::optional<int64_t> rolled;
  const auto removed = prepare_root(d.path().string(), &rolled);
  CHECK(removed.size() == 3);
  CHECK_FALSE(fs::exists(d.path() / "iter_0000015.tmp"));
  CHECK_FALSE(fs::exists(d.path() / ".deleting.iter_0000005"));
  REQUIRE(rolled.has_value());
  CHECK(*rolled == 20);
  CHECK(read_latest(d.path().string()) == 20);
  CHECK(fs::exists(d.path() / "iter_0000010"));
  SECTION("a file as the root is an I/O error") {
    test::write_file(d.file("file"), "x");
    CHECK(code_of([&] { prepare_root(d.file("file")); }) == Code::kIOError);
  }
  SECTION("a missing root is created") {
    prepare_root(d.file("a/b"));
    CHECK(fs::is_directory(d.path() / "a/b"));
  }
}

TEST_CASE("commit renames the temp directory then replaces latest - keep_last prunes older ones") {
  test::TempDir d;
  for (const int64_t it : {10, 20, 30}) {
    fs::create_directories(temp_dir_path(d.path().string(), it));
    test::write_file((fs::path(temp_dir_path(d.path().string(), it)) / kManifestFile).string(),
                     "{}");
    commit_checkpoint(d.path().string(), it);
    CHECK(read_latest(d.path().string()) == it);
    CHECK_FALSE(fs::exists(temp_dir_path(d.path().string(), it)));
  }
  CHECK(committed_iterations(d.path().string()) == std::vector<int64_t>{10, 20, 30});
  CHECK(prune_checkpoints(d.path().string(), 0).empty());
  CHECK(prune_checkpoints(d.path().string(), 2) == std::vector<int64_t>{10});
  CHECK(committed_iterations(d.path().string()) == std::vector<int64_t>{20, 30});
  SECTION("an older copy of the same iteration is replaced whole") {
    fs::create_directories(temp_dir_path(d.path().string(), 20));
    test::write_file((fs::path(temp_dir_path(d.path().string(), 20)) / kManifestFile).string(),
                     "{\"new\": 1}");
    commit_checkpoint(d.path().string(), 20);
    CHECK(test::read_file(d.file("iter_0000020/manifest.json")) == "{\"new\": 1}");
    CHECK(read_latest(d.path().string()) == 20);
  }
}
