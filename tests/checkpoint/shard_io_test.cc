// Shards by global coordinates: state written in one layout (tensor-parallel boxes along either
// dimension, ZeRO-1 flat pieces, padded vocabulary rows) reads back in any other; a missing,
// truncated or damaged shard is an error naming it.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "checkpoint/manifest.h"
#include "checkpoint/shard_io.h"
#include "core/kernels/bf16_math.h"
#include "core/status.h"
#include "test_util.h"

using namespace mtnlg;
namespace fs = std::filesystem;

namespace {

// Element (r, c) of the whole tensor.
float value(int64_t r, int64_t c) {
  return static_cast<float>(r * 100 + c) + 0.5f;
}

// The piece of global [R, C] (valid rows `valid`) with box rows [r0, r0+nr) cols [c0, c0+nc),
// elements [fb, fe) of the box.
StateTensor piece(const std::string& name, Shape global, int64_t r0, int64_t nr, int64_t c0,
                  int64_t nc, int64_t fb = 0, int64_t fe = -1, int64_t valid = 0) {
  StateTensor s;
  s.name = name;
  s.global_shape = global;
  s.start = {r0, c0};
  s.shape = {nr, nc};
  s.flat_begin = fb;
  s.flat_end = fe < 0 ? nr * nc : fe;
  s.valid_rows = valid;
  s.tensor = Tensor::cpu({s.flat_end - s.flat_begin}, DType::kF32);
  float* p = s.tensor.data_as<float>();
  for (int64_t i = s.flat_begin; i < s.flat_end; ++i)
    p[i - s.flat_begin] = value(r0 + i / nc, c0 + i % nc);
  return s;
}

// Writes files of pieces and a manifest listing them; returns the directory.
struct Written {
  std::string dir;
  CheckpointManifest manifest;
};
struct FileSpec {
  std::string name;
  std::vector<StateTensor> state;
  ShardCoords coords;
};
Written write_checkpoint(const test::TempDir& d, const std::vector<FileSpec>& files) {
  Written w;
  w.dir = d.file("iter_0000001");
  fs::create_directories(w.dir);
  for (const auto& [name, state, coords] : files) {
    const FileDigest digest = write_shard_file(w.dir + "/" + name, state, coords);
    w.manifest.files.push_back(ManifestFile{name, digest.bytes, digest.xxh3});
  }
  return w;
}

// Reads `target` (values ignored) and checks every element against value(), padding rows zero
// where `zero_from` says.
void check_read(ShardIndex& index, const StateTensor& target, int64_t zero_from = -1) {
  Tensor out = Tensor::cpu({target.flat_end - target.flat_begin}, DType::kF32);
  index.read(target, out);
  const int64_t nc = target.shape[1];
  const float* p = out.data_as<float>();
  for (int64_t i = target.flat_begin; i < target.flat_end; ++i) {
    const int64_t r = target.start[0] + i / nc, c = target.start[1] + i % nc;
    const float want = zero_from >= 0 && r >= zero_from ? 0.0f : value(r, c);
    if (p[i - target.flat_begin] != want)
      FAIL(target.name << " element (" << r << ", " << c << "): " << p[i - target.flat_begin]
                       << " vs " << want);
  }
}

}  // namespace

TEST_CASE("a tensor split along rows or columns - or in ZeRO pieces - reads back in any layout") {
  test::TempDir d;
  const Shape g{6, 4};
  // Source: "a" split by rows over 2 tensor ranks, "b" by columns, "c" in 3 ZeRO pieces of
  // tensor rank 0's row box over 3 data ranks (the pieces cross row boundaries) and one whole box
  // on tensor rank 1. A replica of "a" on stage 1 (the tied embedding's copy) is read once.
  const Written w = write_checkpoint(
      d, {{"model_a.safetensors",
           {piece("a", g, 0, 3, 0, 4), piece("b", g, 0, 6, 0, 2), piece("c", g, 0, 3, 0, 4, 0, 5)},
           {0, 0, 0}},
          {"model_b.safetensors",
           {piece("a", g, 3, 3, 0, 4), piece("b", g, 0, 6, 2, 2), piece("c", g, 3, 3, 0, 4)},
           {1, 0, 0}},
          {"model_c.safetensors", {piece("c", g, 0, 3, 0, 4, 5, 7)}, {0, 0, 1}},
          {"model_d.safetensors", {piece("c", g, 0, 3, 0, 4, 7, 12)}, {0, 0, 2}},
          {"model_e.safetensors", {piece("a", g, 0, 3, 0, 4, 0, 7)}, {0, 1, 0}}});
  ShardIndex index(w.dir, w.manifest);
  for (const char* name : {"a", "b", "c"}) {
    INFO(name);
    check_read(index, piece(name, g, 0, 6, 0, 4));  // whole
    check_read(index, piece(name, g, 0, 2, 0, 4));  // 3 row shards
    check_read(index, piece(name, g, 4, 2, 0, 4));
    check_read(index, piece(name, g, 0, 6, 1, 1));  // 4 column shards
    check_read(index, piece(name, g, 0, 6, 3, 1));
    check_read(index, piece(name, g, 0, 6, 0, 4, 5, 19));  // a ZeRO piece of the whole
    check_read(index, piece(name, g, 0, 6, 2, 2, 3, 9));   // ... of a column shard
  }
  CHECK(index.names("model_") == std::vector<std::string>{"a", "b", "c"});
  CHECK(index.global_shape("b") == g);
}

TEST_CASE("padded vocabulary rows: copied where a shard has them - zero past it - never required") {
  test::TempDir d;
  // Saved at a padding of 8 rows (valid 6), split over 2 tensor ranks.
  const Written w = write_checkpoint(
      d, {{"model_tp00_pp000.safetensors", {piece("w", {8, 3}, 0, 4, 0, 3, 0, -1, 6)}, {0, 0, 0}},
          {"model_tp01_pp000.safetensors", {piece("w", {8, 3}, 4, 4, 0, 3, 0, -1, 6)}, {1, 0, 0}}});
  ShardIndex index(w.dir, w.manifest);
  // Read at a padding of 12 over 3 ranks, and at none.
  check_read(index, piece("w", {12, 3}, 0, 4, 0, 3, 0, -1, 6));
  check_read(index, piece("w", {12, 3}, 4, 4, 0, 3, 0, -1, 6));
  check_read(index, piece("w", {12, 3}, 8, 4, 0, 3, 0, -1, 6), 8);
  check_read(index, piece("w", {6, 3}, 0, 6, 0, 3, 0, -1, 6));
  SECTION("another vocabulary is another model") {
    Tensor out = Tensor::cpu({12}, DType::kF32);
    CHECK_THROWS_WITH(index.read(piece("w", {8, 3}, 0, 4, 0, 3, 0, -1, 7), out),
                      Catch::Contains("same model shape"));
  }
}

TEST_CASE("a missing - truncated - or damaged shard is an error naming it") {
  test::TempDir d;
  const Shape g{4, 4};
  Written w = write_checkpoint(
      d, {{"model_tp00_pp000.safetensors", {piece("a", g, 0, 2, 0, 4)}, {0, 0, 0}},
          {"model_tp01_pp000.safetensors", {piece("a", g, 2, 2, 0, 4)}, {1, 0, 0}}});
  const std::string second = w.dir + "/model_tp01_pp000.safetensors";
  const auto error = [&]() -> Error {
    ShardIndex index(w.dir, w.manifest);
    Tensor out = Tensor::cpu({16}, DType::kF32);
    try {
      index.read(piece("a", g, 0, 4, 0, 4), out);
    } catch (const Error& e) {
      return e;
    }
    FAIL("read a damaged checkpoint");
    return Error(Code::kInternal, "");
  };
  SECTION("the file is gone") {
    fs::remove(second);
    const Error e = error();
    CHECK(e.code() == Code::kNotFound);
    CHECK(e.context() == second);
  }
  SECTION("the manifest does not list it: elements are missing") {
    w.manifest.files.pop_back();
    const Error e = error();
    CHECK(e.code() == Code::kNotFound);
    CHECK_THAT(e.message(), Catch::Contains("8 of the 16 elements of 'a'"));
  }
  SECTION("truncated") {
    fs::resize_file(second, fs::file_size(second) - 8);
    const Error e = error();
    CHECK(e.code() == Code::kCorruption);
    CHECK(e.context() == second);
    CHECK_THAT(e.message(), Catch::Contains("truncated"));
  }
  SECTION("one byte flipped") {
    std::fstream f(second, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-3, std::ios::end);
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x40);
    f.seekp(-3, std::ios::end);
    f.write(&c, 1);
    f.close();
    const Error e = error();
    CHECK(e.code() == Code::kCorruption);
    CHECK(e.context() == second);
    CHECK_THAT(e.message(), Catch::Contains("checksum"));
  }
}

TEST_CASE("state saved in one precision reads back in another - f32, f64 and bf16") {
  test::TempDir d;
  // The same [4, 6] tensor saved as f32 and as bf16 (values rounded), as "w32" and "w16".
  StateTensor w32 = piece("w32", {4, 6}, 0, 4, 0, 6);
  StateTensor w16 = piece("w16", {4, 6}, 0, 4, 0, 6);
  w16.tensor = Tensor::cpu({24}, DType::kBF16);
  auto* bits = static_cast<uint16_t*>(w16.tensor.data());
  for (int64_t i = 0; i < 24; ++i) bits[i] = f32_to_bf16(w32.tensor.data_as<float>()[i] * 1.001f);
  const Written w = write_checkpoint(d, {{"model_s.safetensors", {w32, w16}, {0, 0, 0}}});
  ShardIndex index(w.dir, w.manifest);
  const auto read_as = [&](const StateTensor& like, DType dtype) {
    Tensor out = Tensor::cpu({24}, dtype);
    index.read(like, out);
    return out;
  };
  const Tensor f32_to_16 = read_as(w32, DType::kBF16);
  const Tensor f32_to_64 = read_as(w32, DType::kF64);
  const Tensor b16_to_32 = read_as(w16, DType::kF32);
  const Tensor b16_to_16 = read_as(w16, DType::kBF16);
  int64_t wrong = 0;
  for (int64_t i = 0; i < 24; ++i) {
    const float x = w32.tensor.data_as<float>()[i];
    wrong += static_cast<const uint16_t*>(f32_to_16.data())[i] != f32_to_bf16(x);  // rounded
    wrong += f32_to_64.data_as<double>()[i] != static_cast<double>(x);             // exact
    wrong += b16_to_32.data_as<float>()[i] != bf16_to_f32(bits[i]);                // exact
    wrong += static_cast<const uint16_t*>(b16_to_16.data())[i] != bits[i];         // as saved
  }
  CHECK(wrong == 0);
}
