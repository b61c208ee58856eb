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
  test::write_file(d.file(kCommitMarkerFile), "20\n");
  const RootState state = prepare_root(d.path().string());
  CHECK(state.removed.size() == 3);
  CHECK_FALSE(fs::exists(d.path() / "iter_0000015.tmp"));
  CHECK_FALSE(fs::exists(d.path() / ".deleting.iter_0000005"));
  REQUIRE(state.rolled_forward.has_value());
  CHECK(*state.rolled_forward == 20);
  CHECK_THAT(state.rolled_because, Catch::Contains("interrupted"));
  CHECK(read_latest(d.path().string()) == 20);
  CHECK_FALSE(fs::exists(d.file(kCommitMarkerFile)));
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

TEST_CASE(
    "the latest file a person wrote wins over newer directories - only a missing or bad one "
    "rolls") {
  test::TempDir d;
  for (const int64_t it : {10, 50, 60}) make_committed(d, it);
  SECTION("a rollback (echo 50 > latest) is obeyed and the newer ones named") {
    test::write_file(d.file(kLatestFile), "50\n");
    const RootState state = prepare_root(d.path().string());
    CHECK_FALSE(state.rolled_forward.has_value());
    CHECK(read_latest(d.path().string()) == 50);
    CHECK(state.newer_than_latest == std::vector<int64_t>{60});
    CHECK(find_checkpoint(d.path().string()) == d.file("iter_0000050"));
    // And again at the next start: nothing undoes it.
    prepare_root(d.path().string());
    CHECK(read_latest(d.path().string()) == 50);
  }
  SECTION("no latest file: the newest committed") {
    const RootState state = prepare_root(d.path().string());
    CHECK(state.rolled_forward == 60);
    CHECK_THAT(state.rolled_because, Catch::Contains("no latest"));
    CHECK(read_latest(d.path().string()) == 60);
  }
  SECTION("an unreadable latest file: the newest committed, saying why") {
    test::write_file(d.file(kLatestFile), "fifty\n");
    const RootState state = prepare_root(d.path().string());
    CHECK(state.rolled_forward == 60);
    CHECK_THAT(state.rolled_because, Catch::Contains("unreadable") && Catch::Contains("fifty"));
  }
  SECTION("a commit that died before its rename leaves the latest as it was") {
    test::write_file(d.file(kLatestFile), "50\n");
    fs::create_directories(d.path() / "iter_0000070.tmp");
    test::write_file(d.file(kCommitMarkerFile), "70\n");
    const RootState state = prepare_root(d.path().string());
    CHECK_FALSE(state.rolled_forward.has_value());
    CHECK(read_latest(d.path().string()) == 50);
    CHECK_FALSE(fs::exists(d.file(kCommitMarkerFile)));
    CHECK_FALSE(fs::exists(d.path() / "iter_0000070.tmp"));
  }
}

TEST_CASE(
    "find_checkpoint_at picks an iteration (checkpoint.load_iteration) - or names what exists") {
  test::TempDir d;
  for (const int64_t it : {10, 20}) make_committed(d, it);
  test::write_file(d.file(kLatestFile), "20\n");
  CHECK(find_checkpoint_at(d.path().string(), 10, "checkpoint.load_iteration") ==
        d.file("iter_0000010"));
  try {
    find_checkpoint_at(d.path().string(), 15, "checkpoint.load_iteration");
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.code() == Code::kNotFound);
    CHECK_THAT(std::string(e.what()),
               Catch::Contains("checkpoint.load_iteration is 15") && Catch::Contains("10, 20"));
  }
  CHECK(code_of([&] { find_checkpoint_at(d.file("missing"), 10, "k"); }) == Code::kNotFound);
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

TEST_CASE("keep_last never deletes a pinned checkpoint nor one newer than the latest") {
  test::TempDir d;
  const std::string root = d.path().string();
  const auto commit = [&](int64_t it, const std::string& body) {
    fs::create_directories(temp_dir_path(root, it));
    test::write_file((fs::path(temp_dir_path(root, it)) / kManifestFile).string(), body);
    return commit_checkpoint(root, it);
  };
  for (const int64_t it : {10, 20, 30, 40}) commit(it, "{}");
  test::write_file(d.file("iter_0000020/pinned.txt"), "the one before the spike\n");
  CHECK(pin_note(d.file("iter_0000020")) == "the one before the spike");
  CHECK_FALSE(pin_note(d.file("iter_0000030")).has_value());
  // Pinned ones do not count among the newest keep_last.
  CHECK(prune_checkpoints(root, 2) == std::vector<int64_t>{10});
  CHECK(committed_iterations(root) == std::vector<int64_t>{20, 30, 40});
  SECTION("after a rollback to 30 the newer 40 is not pruned, and is replaced by this run's save") {
    test::write_file(d.file(kLatestFile), "30\n");
    CHECK(prune_checkpoints(root, 1).empty());
    CHECK(committed_iterations(root) == std::vector<int64_t>{20, 30, 40});
    CHECK_FALSE(commit(40, "{\"new\": 1}").has_value());
    CHECK(test::read_file(d.file("iter_0000040/manifest.json")) == "{\"new\": 1}");
  }
  SECTION("a save over a pinned iteration keeps the pinned one aside") {
    test::write_file(d.file(kLatestFile), "10\n");
    const auto aside = commit(20, "{\"new\": 1}");
    REQUIRE(aside.has_value());
    CHECK(*aside == d.file("iter_0000020.pinned-1"));
    CHECK(test::read_file(d.file("iter_0000020.pinned-1/pinned.txt")) ==
          "the one before the spike\n");
    CHECK(test::read_file(d.file("iter_0000020/manifest.json")) == "{\"new\": 1}");
    CHECK(read_latest(root) == 20);
  }
}
