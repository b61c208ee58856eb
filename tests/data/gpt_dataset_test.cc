// Tests for data/gpt_dataset.h: samples against a hand-built token stream (overlap by one,
// wrap-around at the epoch boundary), Megatron's split rule on hand-computed examples, and the
// errors for an empty train split and out-of-vocabulary ids.
#include "data/gpt_dataset.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "core/status.h"
#include "data/indexed_dataset_builder.h"
#include "test_util.h"

namespace mtnlg {
namespace {

using Docs = std::vector<std::vector<int32_t>>;
using Bounds = std::array<int64_t, 4>;

std::shared_ptr<IndexedDataset> build(const std::string& prefix, const Docs& docs,
                                      TokenType type = TokenType::kUInt16) {
  IndexedDatasetBuilder b(prefix, type);
  for (const auto& d : docs) b.add_document(d);
  b.finish();
  return IndexedDataset::open(prefix);
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

std::vector<int32_t> sample_of(const SequentialGPTDataset& ds, int64_t i) {
  std::vector<int32_t> out(static_cast<size_t>(ds.seq_length() + 1), -1);
  ds.sample(i, out.data());
  return out;
}

TEST_CASE("sample i is the S+1 stream tokens from i*S of the repeating stream") {
  // Documents of lengths 3, 0, 5, 1, 4: token value = 100 + its place in the stream. The empty
  // document has no sequence: the range counts the 4 others.
  const Docs docs = {{100, 101, 102}, {}, {103, 104, 105, 106, 107}, {108}, {109, 110, 111, 112}};
  const int64_t total = 13;
  test::TempDir dir;
  auto ids = build(dir.file("s"), docs);
  REQUIRE(ids->num_sequences() == 4);
  const int64_t s = GENERATE(1, 2, 3, 5, 12, 13, 20);
  SequentialGPTDataset ds(ids, s, DocumentRange{0, 4});
  CHECK(ds.tokens_per_epoch() == total);
  for (int64_t i = 0; i < 40; ++i) {
    std::vector<int32_t> want;
    for (int64_t j = 0; j <= s; ++j)
      want.push_back(static_cast<int32_t>(100 + (i * s + j) % total));
    INFO("S = " << s << ", i = " << i);
    CHECK(sample_of(ds, i) == want);
  }
}

TEST_CASE("samples overlap by one token and wrap at the end of the epoch") {
  // The example in data/gpt_dataset.h: S = 3, documents [a b c] [d e].
  test::TempDir dir;
  auto ids = build(dir.file("w"), {{1, 2, 3}, {4, 5}});
  SequentialGPTDataset ds(ids, 3, DocumentRange{0, 2});
  CHECK(sample_of(ds, 0) == std::vector<int32_t>{1, 2, 3, 4});
  CHECK(sample_of(ds, 1) == std::vector<int32_t>{4, 5, 1, 2});  // straddles the boundary
  CHECK(sample_of(ds, 2) == std::vector<int32_t>{2, 3, 4, 5});
  CHECK(sample_of(ds, 3) == std::vector<int32_t>{5, 1, 2, 3});
  CHECK(sample_of(ds, 5) == sample_of(ds, 0));  // 5 * 3 = 15 = 3 epochs
  // Large indices stay exact: (10^12 * 3) mod 5 = 0.
  CHECK(sample_of(ds, 1000000000000) == sample_of(ds, 0));
  for (int64_t i = 0; i < 10; ++i) CHECK(sample_of(ds, i).back() == sample_of(ds, i + 1).front());
}

TEST_CASE("a document range selects only its documents' sequences") {
  test::TempDir dir;
  auto ids = build(dir.file("r"), {{1, 2}, {3, 4, 5}, {6}, {7, 8}});
  SequentialGPTDataset ds(ids, 2, DocumentRange{1, 3});
  CHECK(ds.tokens_per_epoch() == 4);
  CHECK(sample_of(ds, 0) == std::vector<int32_t>{3, 4, 5});
  CHECK(sample_of(ds, 1) == std::vector<int32_t>{5, 6, 3});
}

TEST_CASE("split boundaries follow Megatron's rounding rule") {
  // Megatron's own docstring example.
  CHECK(split_boundaries(1000, {90, 9, 1}) == Bounds{0, 900, 990, 1000});
  // Book-ends at the running sums 1/3, 2/3, 1: 3.33 -> 3, 6.67 -> 7, 10.
  CHECK(split_boundaries(10, {1, 1, 1}) == Bounds{0, 3, 7, 10});
  // 2.5 rounds to even (2), as Python's round. Rounding half away would give 0,3,5,5.
  CHECK(split_boundaries(5, {1, 1, 0}) == Bounds{0, 2, 5, 5});
  // 3.5 rounds to even (4).
  CHECK(split_boundaries(7, {1, 1, 0}) == Bounds{0, 4, 7, 7});
  // The demo corpus: 1189 chapters; 1152.141 -> 1152, 1187.81 -> 1188, 1189.
  CHECK(split_boundaries(1189, {969, 30, 1}) == Bounds{0, 1152, 1188, 1189});
  // Scale does not matter.
  CHECK(split_boundaries(1189, {0.969, 0.03, 0.001}) == Bounds{0, 1152, 1188, 1189});
  // 1/3 of one document rounds to 0: the train split is empty (split_range says so by name).
  CHECK(split_boundaries(1, {1, 1, 1}) == Bounds{0, 0, 1, 1});
  CHECK(split_boundaries(0, {1, 0, 0}) == Bounds{0, 0, 0, 0});
}

TEST_CASE("bad data.split values are rejected naming the key") {
  for (const std::vector<double>& bad : std::vector<std::vector<double>>{
           {1, 0}, {1, 0, 0, 0}, {1, -1, 0}, {0, 0, 0}, {NAN, 1, 1}, {INFINITY, 1, 1}}) {
    Error e = error_of([&] { split_boundaries(10, bad); });
    CHECK(e.code() == Code::kInvalidArgument);
    CHECK_THAT(e.what(), Catch::Contains("data.split"));
  }
}

TEST_CASE("split_range gives each split its documents and rejects an empty train split") {
  test::TempDir dir;
  auto ids = build(dir.file("sp"), {{1}, {2}, {3}, {4}, {5}});
  const std::vector<double> split = {1, 1, 0};  // 5 documents: [0, 2, 5, 5] (2.5 -> 2)
  CHECK(split_range(*ids, split, Split::kTrain).begin == 0);
  CHECK(split_range(*ids, split, Split::kTrain).end == 2);
  CHECK(split_range(*ids, split, Split::kValid).begin == 2);
  CHECK(split_range(*ids, split, Split::kValid).end == 5);
  CHECK(split_range(*ids, split, Split::kTest).empty());

  Error e = error_of([&] { split_range(*ids, {0, 1, 0}, Split::kTrain); });
  CHECK(e.code() == Code::kInvalidArgument);
  CHECK_THAT(e.what(), Catch::Contains("data.split") && Catch::Contains(dir.file("sp")));

  e = error_of([&] { SequentialGPTDataset ds(ids, 4, DocumentRange{2, 2}); });
  CHECK(e.code() == Code::kInvalidArgument);
  CHECK_THAT(e.what(), Catch::Contains("data.split"));
}

TEST_CASE("an empty range and a bad seq_length are rejected - empty documents are skipped") {
  test::TempDir dir;
  auto ids = build(dir.file("e"), {{}, {}, {1}});
  REQUIRE(ids->num_sequences() == 1);
  CHECK(error_of([&] {
          SequentialGPTDataset ds(ids, 4, DocumentRange{0, 0});
        }).code() == Code::kInvalidArgument);
  CHECK(error_of([&] {
          SequentialGPTDataset ds(ids, 0, DocumentRange{0, 1});
        }).code() == Code::kInvalidArgument);
  SequentialGPTDataset one(ids, 2, DocumentRange{0, 1});
  CHECK(sample_of(one, 7) == std::vector<int32_t>{1, 1, 1});
}

TEST_CASE(
    "splits count sequences, as Megatron's GPTDataset: sentences apart, empty documents not") {
  // Megatron-LM splits and indexes the .idx's sequences (numel_low_level_dataset), which differ
  // from its documents under --split-sentences and for empty text.
  test::TempDir dir;
  IndexedDatasetBuilder b(dir.file("sent"), TokenType::kUInt16);
  const std::vector<int32_t> three = {1, 2, 3, 4, 5, 6}, lens = {2, 3, 1};
  b.add_document(three, lens);  // one document of three sentences
  b.add_document(std::vector<int32_t>{});
  b.add_document(std::vector<int32_t>{7, 8});
  b.finish();
  auto ids = IndexedDataset::open(dir.file("sent"));
  REQUIRE(ids->num_documents() == 3);
  REQUIRE(ids->num_sequences() == 4);
  // 4 sequences at 1:1:0 -> [0, 2, 4, 4]: the first document's sentences land in both splits.
  CHECK(split_range(*ids, {1, 1, 0}, Split::kTrain).end == 2);
  CHECK(split_range(*ids, {1, 1, 0}, Split::kValid).begin == 2);
  SequentialGPTDataset valid(ids, 2, split_range(*ids, {1, 1, 0}, Split::kValid));
  CHECK(valid.tokens_per_epoch() == 3);
  CHECK(sample_of(valid, 0) == std::vector<int32_t>{6, 7, 8});
}

TEST_CASE("check_vocab names the file and the first id outside the vocabulary") {
  const TokenType type = GENERATE(TokenType::kUInt16, TokenType::kInt32);
  test::TempDir dir;
  auto ids = build(dir.file("v"), {{1, 50256}, {7, 50300, 50257}, {60000}}, type);
  SequentialGPTDataset train(ids, 2, DocumentRange{0, 2});
  train.check_vocab(50301);  // fits
  Error e = error_of([&] { train.check_vocab(50257); });
  CHECK(e.code() == Code::kInvalidArgument);
  CHECK_THAT(e.what(), Catch::Contains("token id 50300") && Catch::Contains("sequence 1") &&
                           Catch::Contains(dir.file("v") + ".bin") &&
                           Catch::Contains("model.vocab_size"));
  // Only the range is scanned: 60000 in document 2 is outside it.
  SequentialGPTDataset all(ids, 2, DocumentRange{0, 3});
  CHECK_THAT(error_of([&] { all.check_vocab(50400); }).what(), Catch::Contains("token id 60000"));
  all.check_vocab(70000);
}

}  // namespace
}  // namespace mtnlg
