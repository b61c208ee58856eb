// Tests for data/shuffled_gpt_dataset.h: samples against the indices, shuffle: false equals
// SequentialGPTDataset, splits are disjoint, and the index cache: written once, reused with the
// same samples, and damaged or mismatching entries rejected with an error naming the file.
#include "data/shuffled_gpt_dataset.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <set>
#include <vector>

#include "core/status.h"
#include "data/indexed_dataset_builder.h"
#include "test_util.h"

namespace mtnlg {
namespace {

namespace fs = std::filesystem;

// Documents of 1..10 tokens; token value = 1000 * doc + position, so every token
// names its document.
std::shared_ptr<IndexedDataset> make_corpus(const test::TempDir& dir, int64_t n) {
  IndexedDatasetBuilder b(dir.file("c"), TokenType::kInt32);
  for (int64_t d = 0; d < n; ++d) {
    std::vector<int32_t> doc;
    for (int64_t t = 0; t < 1 + (d * 7 + 4) % 10; ++t)
      doc.push_back(static_cast<int32_t>(1000 * d + t));
    b.add_document(doc);
  }
  b.finish();
  return IndexedDataset::open(dir.file("c"));
}

std::vector<int32_t> sample_of(const SampleSource& ds, int64_t i) {
  std::vector<int32_t> out(static_cast<size_t>(ds.seq_length() + 1), -1);
  ds.sample(i, out.data());
  return out;
}

template <typename F>
Error error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  FAIL("expected an mtnlg::Error");
  throw std::logic_error("unreachable");
}

GPTDatasetConfig config(int64_t s, int64_t n, bool shuffle, const std::string& cache = "") {
  GPTDatasetConfig c;
  c.seq_length = s;
  c.num_samples = n;
  c.seed = 1234;
  c.shuffle = shuffle;
  c.cache_dir = cache;
  return c;
}

TEST_CASE("shuffle: false equals SequentialGPTDataset") {
  test::TempDir dir;
  auto ids = make_corpus(dir, 60);
  const DocumentRange range{5, 55};
  const int64_t s = GENERATE(1, 3, 8, 64, 300);
  GPTDataset gpt(ids, range, config(s, 40, false));
  SequentialGPTDataset seq(ids, s, range);
  CHECK(gpt.size() >= 40);
  INFO("S = " << s);
  for (int64_t i = 0; i < gpt.size(); ++i) CHECK(sample_of(gpt, i) == sample_of(seq, i));
}

TEST_CASE("shuffled samples are the unshuffled ones - permuted by the shuffle index") {
  test::TempDir dir;
  auto ids = make_corpus(dir, 80);
  const DocumentRange range{0, 80};
  GPTDataset gpt(ids, range, config(16, 100, true));
  CHECK_FALSE(gpt.built_from_cache());
  // Rebuild the stream from the document index and cut sample shuffle[i] from it.
  std::vector<int32_t> stream;
  for (int64_t p = 0; p < gpt.document_index().size(); ++p) {
    const int64_t d = gpt.document_index()[p];
    for (int64_t t = 0; t < ids->sequence_length(d); ++t)
      stream.push_back(static_cast<int32_t>(1000 * d + t));
  }
  std::set<int64_t> seen;
  for (int64_t i = 0; i < gpt.size(); ++i) {
    const int64_t j = gpt.shuffle_index()[i];
    seen.insert(j);
    const std::vector<int32_t> want(stream.begin() + j * 16, stream.begin() + j * 16 + 17);
    CHECK(sample_of(gpt, i) == want);
  }
  CHECK(static_cast<int64_t>(seen.size()) == gpt.size());
  // Deterministic per seed; another seed gives another order.
  GPTDataset again(ids, range, config(16, 100, true));
  auto other_cfg = config(16, 100, true);
  other_cfg.seed = 4321;
  GPTDataset other(ids, range, other_cfg);
  bool differs = false;
  for (int64_t i = 0; i < gpt.size(); ++i) {
    CHECK(sample_of(again, i) == sample_of(gpt, i));
    differs = differs || sample_of(other, i) != sample_of(gpt, i);
  }
  CHECK(differs);
}

TEST_CASE("the final epoch's samples come last when it is separate") {
  test::TempDir dir;
  auto ids = make_corpus(dir, 40);
  GPTDataset one(ids, {0, 40}, config(4, 1, true));
  const int64_t per_epoch = one.size();  // (T - 1) / 4
  // Two full epochs plus one sample: the third epoch is needed for a sliver only.
  const int64_t n = num_samples_of(2, one.tokens_per_epoch(), 4) + 1;
  GPTDataset gpt(ids, {0, 40}, config(4, n, true));
  REQUIRE(gpt.num_epochs() == 3);
  REQUIRE(gpt.separate_final_epoch());
  const int64_t before = num_samples_of(2, gpt.tokens_per_epoch(), 4);
  for (int64_t i = 0; i < gpt.size(); ++i) CHECK((gpt.shuffle_index()[i] < before) == (i < before));
  // Nearly a full final epoch: shuffled together.
  const int64_t m = before + per_epoch - 1;
  GPTDataset most(ids, {0, 40}, config(4, m, true));
  CHECK_FALSE(most.separate_final_epoch());
}

TEST_CASE("splits are disjoint: no document's tokens in two splits") {
  test::TempDir dir;
  auto ids = make_corpus(dir, 100);
  std::vector<std::set<int32_t>> docs(3);
  for (Split which : {Split::kTrain, Split::kValid, Split::kTest}) {
    const DocumentRange r = split_range(*ids, {80, 15, 5}, which);
    GPTDataset gpt(ids, r, config(8, 50, true));
    for (int64_t i = 0; i < gpt.size(); ++i) {
      for (int32_t t : sample_of(gpt, i)) {
        const int32_t d = t / 1000;
        CHECK((d >= r.begin && d < r.end));
        docs[static_cast<size_t>(which)].insert(d);
      }
    }
  }
  for (size_t a = 0; a < 3; ++a) {
    for (size_t b = a + 1; b < 3; ++b) {
      for (int32_t d : docs[a]) CHECK(docs[b].count(d) == 0);
    }
  }
}

TEST_CASE("indices are cached once - reused - and damaged caches are rejected") {
  test::TempDir dir;
  auto ids = make_corpus(dir, 70);
  const std::string cache = dir.file("cache");
  GPTDataset first(ids, {0, 60}, config(8, 90, true, cache));
  CHECK_FALSE(first.built_from_cache());
  REQUIRE(fs::exists(first.cache_description_path()));
  const auto files = std::distance(fs::directory_iterator(cache), fs::directory_iterator());
  CHECK(files == 4);  // description + three arrays, no temporaries left

  GPTDataset second(ids, {0, 60}, config(8, 90, true, cache));
  CHECK(second.built_from_cache());
  REQUIRE(second.size() == first.size());
  for (int64_t i = 0; i < first.size(); ++i) CHECK(sample_of(second, i) == sample_of(first, i));

  // Anything in the description makes a new entry, not a reuse.
  GPTDataset other(ids, {0, 60}, config(8, 91, true, cache));
  CHECK_FALSE(other.built_from_cache());
  GPTDataset other_range(ids, {0, 61}, config(8, 90, true, cache));
  CHECK_FALSE(other_range.built_from_cache());

  SECTION("a description that differs under the same name") {
    test::write_file(first.cache_description_path(), "{\"class\": \"GPTDataset\"}");
    const Error e = error_of([&] { GPTDataset d(ids, {0, 60}, config(8, 90, true, cache)); });
    CHECK(e.code() == Code::kCorruption);
    CHECK(e.context() == first.cache_description_path());
    CHECK_THAT(e.message(), Catch::Contains("delete the cache directory"));
  }
  SECTION("a flipped byte in an array") {
    std::string path = first.cache_description_path();
    path =
        path.substr(0, path.size() - std::string("description.json").size()) + "sample_index.bin";
    std::string bytes = test::read_file(path);
    bytes[bytes.size() - 3] ^= 0x10;
    test::write_file(path, bytes);
    const Error e = error_of([&] { GPTDataset d(ids, {0, 60}, config(8, 90, true, cache)); });
    CHECK(e.code() == Code::kCorruption);
    CHECK(e.context() == path);
    CHECK_THAT(e.message(), Catch::Contains("checksum"));
  }
  SECTION("a truncated array") {
    std::string path = first.cache_description_path();
    path =
        path.substr(0, path.size() - std::string("description.json").size()) + "shuffle_index.bin";
    fs::resize_file(path, fs::file_size(path) - 4);
    const Error e = error_of([&] { GPTDataset d(ids, {0, 60}, config(8, 90, true, cache)); });
    CHECK(e.code() == Code::kCorruption);
    CHECK(e.context() == path);
  }
  SECTION("a missing array") {
    std::string path = first.cache_description_path();
    path =
        path.substr(0, path.size() - std::string("description.json").size()) + "document_index.bin";
    fs::remove(path);
    const Error e = error_of([&] { GPTDataset d(ids, {0, 60}, config(8, 90, true, cache)); });
    CHECK(e.code() == Code::kCorruption);
  }
}

TEST_CASE("bad inputs are rejected naming the key") {
  test::TempDir dir;
  auto ids = make_corpus(dir, 10);
  CHECK(error_of([&] {
          GPTDataset d(ids, {0, 10}, config(0, 5, true));
        }).context() == "model.seq_length");
  CHECK(error_of([&] { GPTDataset d(ids, {4, 4}, config(4, 5, true)); }).context() == "data.split");
}

}  // namespace
}  // namespace mtnlg
