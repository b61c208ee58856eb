// CheckpointSaver on two in-process ranks (Gloo over a MemoryStore): a save commits every rank's
// files under one manifest; a rank that fails to write fails the save on every rank and commits
// nothing; an asynchronous save writes the state as it was when save() returned.
#include "checkpoint/saver.h"

#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <mutex>

#include "checkpoint/checkpoint_dir.h"
#include "core/backend.h"
#include "core/status.h"
#include "parallel/gloo_communicator.h"
#include "parallel/store.h"
#include "test_util.h"

using namespace mtnlg;
namespace fs = std::filesystem;

namespace {

StateTensor filled(const std::string& name, float v) {
  StateTensor s;
  s.name = name;
  s.global_shape = {4};
  s.start = {0};
  s.shape = {4};
  s.flat_begin = 0;
  s.flat_end = 4;
  s.tensor = Tensor::cpu({4}, DType::kF32);
  for (int i = 0; i < 4; ++i) s.tensor.data_as<float>()[i] = v + static_cast<float>(i);
  return s;
}

RankShards shards_of(int rank, float v, const std::string& file = "") {
  RankShards r;
  r.coords = ShardCoords{rank, 0, 0};
  r.model_file = file.empty() ? model_file_name(rank, 0) : file;
  std::string name = "p";
  name += std::to_string(rank);
  r.model = {filled(name, v)};
  return r;
}

// Two tensor ranks' model files and no optimizer: what the manifest's layout says.
CheckpointManifest manifest_at(int64_t it) {
  CheckpointManifest m;
  m.iteration = it;
  m.tensor = 2;
  m.has_optimizer = false;
  m.model = ManifestModel{2, 8, 2, 32, 4, 4, 16, 16};
  return m;
}

// fn(rank, saver, backend) on two ranks, each with its own Gloo "checkpoint" communicator.
void on_two_ranks(const std::string& root, bool async, int64_t keep_last,
                  const std::function<void(int, CheckpointSaver&, Backend&)>& fn) {
  MemoryStore store;
  test::run_ranks(2, [&](int r) {
    auto comm = make_gloo_communicator(store, "checkpoint", r, {0, 1}, std::chrono::seconds(20));
    const auto backend = make_cpu_backend(1);
    CheckpointSaver saver(root, keep_last, async, comm.get());
    fn(r, saver, *backend);
  });
}

float first_value(const std::string& path, const std::string& name) {
  const std::string dir = find_checkpoint(path).value();
  const CheckpointManifest m = read_manifest(dir);
  ShardIndex index(dir, m);
  Tensor out = Tensor::cpu({4}, DType::kF32);
  index.read(filled(name, 0), out);
  return out.data_as<float>()[0];
}

}  // namespace

TEST_CASE("a synchronous save commits both ranks' files under one manifest") {
  test::TempDir d;
  const std::string root = d.file("ck");
  prepare_root(root);
  on_two_ranks(root, false, 0, [&](int r, CheckpointSaver& saver, Backend& be) {
    saver.save(shards_of(r, 10.0f * static_cast<float>(r)), manifest_at(5), be);
  });
  CHECK(read_latest(root) == 5);
  const CheckpointManifest m = read_manifest(root + "/iter_0000005");
  REQUIRE(m.files.size() == 2);
  CHECK(m.files[0].name == "model_tp00_pp000.safetensors");
  CHECK(m.files[1].name == "model_tp01_pp000.safetensors");
  ShardIndex index(root + "/iter_0000005", m);
  CHECK_NOTHROW(index.verify_all());
  CHECK(first_value(root + "/iter_0000005", "p1") == 10.0f);
}

TEST_CASE("a rank that cannot write fails the save everywhere and commits nothing") {
  test::TempDir d;
  const std::string root = d.file("ck");
  prepare_root(root);
  on_two_ranks(root, false, 0, [&](int r, CheckpointSaver& saver, Backend& be) {
    saver.save(shards_of(r, 1.0f), manifest_at(5), be);
  });
  std::mutex mu;
  std::vector<std::string> errors;
  on_two_ranks(root, false, 0, [&](int r, CheckpointSaver& saver, Backend& be) {
    try {
      // Rank 1's file goes into a directory that does not exist: its write fails.
      saver.save(shards_of(r, 2.0f, r == 1 ? "no/such/dir.safetensors" : ""), manifest_at(9), be);
    } catch (const Error& e) {
      std::lock_guard<std::mutex> lock(mu);
      errors.push_back(e.message());
    }
  });
  REQUIRE(errors.size() == 2);
  for (const std::string& e : errors) {
    CHECK_THAT(e, Catch::Contains("failed on rank 1"));
    CHECK_THAT(e, Catch::Contains("previous checkpoint is intact"));
  }
  CHECK(read_latest(root) == 5);
  CHECK_FALSE(fs::exists(root + "/iter_0000009"));
  CHECK_FALSE(fs::exists(temp_dir_path(root, 9)));
  CHECK(first_value(root, "p0") == 1.0f);
}

TEST_CASE("an asynchronous save writes the state of save() time - keep_last prunes after commit") {
  test::TempDir d;
  const std::string root = d.file("ck");
  prepare_root(root);
  on_two_ranks(root, true, 1, [&](int r, CheckpointSaver& saver, Backend& be) {
    for (const int64_t it : {1, 2}) {
      RankShards s = shards_of(r, static_cast<float>(it));
      const Tensor live = s.model[0].tensor;
      const SaveStats stats = saver.save(std::move(s), manifest_at(it), be);
      if (stats.stall_ms < 0) throw std::runtime_error("no stall measured");
      live.data_as<float>()[0] = -1.0f;  // training goes on: the save must not see this
      saver.check();
    }
    saver.wait();
  });
  CHECK(read_latest(root) == 2);
  CHECK(committed_iterations(root) == std::vector<int64_t>{2});
  CHECK(first_value(root, "p0") == 2.0f);
  CHECK(first_value(root, "p1") == 2.0f);
}

TEST_CASE("a failed asynchronous save is rethrown by wait") {
  test::TempDir d;
  const std::string root = d.file("ck");
  prepare_root(root);
  std::mutex mu;
  int failures = 0;
  on_two_ranks(root, true, 0, [&](int r, CheckpointSaver& saver, Backend& be) {
    saver.save(shards_of(r, 1.0f, r == 0 ? "no/such/dir.safetensors" : ""), manifest_at(3), be);
    try {
      saver.wait();
    } catch (const Error& e) {
      if (e.code() != Code::kIOError) throw;
      std::lock_guard<std::mutex> lock(mu);
      ++failures;
    }
  });
  CHECK(failures == 2);
  CHECK_FALSE(read_latest(root).has_value());
}
