// Token ids are checked against the vocabulary once per dataset, at start: the largest id of the
// .bin, scanned and then kept in the index cache.
#include "data/token_check.h"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <vector>

#include "core/status.h"
#include "data/indexed_dataset_builder.h"
#include "test_util.h"

using namespace mtnlg;

namespace {

void write(const std::string& prefix, TokenType type,
           const std::vector<std::vector<int32_t>>& docs) {
  IndexedDatasetBuilder b(prefix, type);
  for (const auto& d : docs) b.add_document(d);
  b.finish();
}

}  // namespace

TEST_CASE("the largest token id is scanned once then read from the cache") {
  test::TempDir dir;
  write(dir.file("u16"), TokenType::kUInt16, {{1, 2, 300}, {7, 65000, 3}, {4}});
  const auto d = IndexedDataset::open(dir.file("u16"));
  CHECK(max_token_id(*d, "") == 65000);
  CHECK(max_token_id(*d, dir.file("cache")) == 65000);
  bool cached = false;
  for (const auto& e : std::filesystem::directory_iterator(dir.file("cache")))
    cached = cached || e.path().filename().string().find("TokenRange-max") != std::string::npos;
  CHECK(cached);
  CHECK(max_token_id(*d, dir.file("cache")) == 65000);  // from the cache

  write(dir.file("i32"), TokenType::kInt32, {{5, 100000}, {2}});
  CHECK(max_token_id(*IndexedDataset::open(dir.file("i32")), "") == 100000);
}

TEST_CASE(
    "a negative int32 id is corruption - an id at or past the vocabulary names the blend entry") {
  test::TempDir dir;
  write(dir.file("neg"), TokenType::kInt32, {{5, 3}});
  {  // a damaged .bin: the second id becomes -3 (the builder itself refuses negative ids)
    std::fstream f(dir.file("neg.bin"), std::ios::in | std::ios::out | std::ios::binary);
    const int32_t bad = -3;
    f.seekp(4);
    f.write(reinterpret_cast<const char*>(&bad), 4);
  }
  try {
    max_token_id(*IndexedDataset::open(dir.file("neg")), "");
    FAIL("accepted a negative token id");
  } catch (const Error& e) {
    CHECK(e.code() == Code::kCorruption);
    CHECK_THAT(e.message(), Catch::Contains("-3"));
  }
  write(dir.file("ok"), TokenType::kUInt16, {{1, 2, 3}});
  write(dir.file("big"), TokenType::kUInt16, {{1, 511, 512}});
  DataConfig cfg;
  cfg.blend = {{dir.file("ok"), 1.0}, {dir.file("big"), 1.0}};
  CHECK_NOTHROW(check_token_ids(cfg, 513));
  try {
    check_token_ids(cfg, 512);
    FAIL("accepted id 512 with a vocabulary of 512");
  } catch (const Error& e) {
    CHECK(e.context() == "data.blend[1]");
    CHECK_THAT(e.message(), Catch::Contains("token id 512") && Catch::Contains("big.bin") &&
                                Catch::Contains("model.vocab_size 512"));
  }
}
