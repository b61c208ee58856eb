// Tests for data/gpt_indices.h: epochs, the per-epoch document permutation, sample boundaries
// reconstructed from the indices, the shuffle permutation and its determinism, Megatron's
// separate-final-epoch rule, and the worked example of the header.
#include "data/gpt_indices.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <numeric>
#include <vector>

#include "data/indexed_dataset_builder.h"
#include "test_util.h"

namespace mtnlg {
namespace {

std::vector<int64_t> values(const IndexArray& a, int64_t begin = 0, int64_t end = -1) {
  if (end < 0) end = a.size();
  std::vector<int64_t> v;
  for (int64_t i = begin; i < end; ++i) v.push_back(a[i]);
  return v;
}

std::vector<int64_t> iota(int64_t begin, int64_t end) {
  std::vector<int64_t> v(static_cast<size_t>(end - begin));
  std::iota(v.begin(), v.end(), begin);
  return v;
}

// Documents of lengths 0..(n-1) mod 7 (some empty), token value = 1000 * doc + position.
std::shared_ptr<IndexedDataset> make_corpus(const test::TempDir& dir, int64_t n) {
  IndexedDatasetBuilder b(dir.file("c"), TokenType::kInt32);
  for (int64_t d = 0; d < n; ++d) {
    std::vector<int32_t> doc;
    for (int64_t t = 0; t < (d * 5 + 3) % 7; ++t) doc.push_back(static_cast<int32_t>(1000 * d + t));
    b.add_document(doc);
  }
  b.finish();
  return IndexedDataset::open(dir.file("c"));
}

TEST_CASE("epochs: the fewest whose tokens give num_samples * S + 1") {
  CHECK(num_epochs_for(5, 4, 2) == 2);   // 9 tokens needed, 10 available
  CHECK(num_epochs_for(5, 2, 2) == 1);   // 5 needed
  CHECK(num_epochs_for(10, 5, 2) == 2);  // 11 needed: one token short of one epoch
  CHECK(num_epochs_for(10, 0, 2) == 1);
  CHECK(num_epochs_for(100, 1000, 10) == 101);
  for (int64_t t = 1; t < 30; ++t) {
    for (int64_t n = 0; n < 30; ++n) {
      const int64_t e = num_epochs_for(t, n, 3);
      CHECK(e * t >= n * 3 + 1);
      CHECK((e == 1 || (e - 1) * t < n * 3 + 1));
      CHECK(num_samples_of(e, t, 3) >= n);
    }
  }
}

TEST_CASE("each epoch of the document index holds every document of the range once") {
  const DocumentRange range{7, 7 + 50};
  const IndexArray a = build_document_index(range, 4, true, 1234);
  REQUIRE(a.size() == 200);
  CHECK_FALSE(a.wide());
  for (int64_t e = 0; e < 4; ++e) {
    auto epoch = values(a, e * 50, (e + 1) * 50);
    CHECK(epoch != iota(7, 57));  // shuffled (50! makes the identity impossible in practice)
    std::sort(epoch.begin(), epoch.end());
    CHECK(epoch == iota(7, 57));
  }
  CHECK(values(a, 0, 50) != values(a, 50, 100));  // each epoch has its own order
  CHECK(build_document_index(range, 4, true, 1234) == a);
  CHECK_FALSE(build_document_index(range, 4, true, 1235) == a);
  const IndexArray plain = build_document_index(range, 2, false, 1234);
  auto twice = iota(7, 57);
  twice.insert(twice.end(), twice.begin(), twice.end());
  CHECK(values(plain) == twice);
}

TEST_CASE("the shuffle index is a permutation - deterministic per seed") {
  const IndexArray a = build_shuffle_index(1000, 1000, true, 7);
  auto v = values(a);
  CHECK(v != iota(0, 1000));
  std::sort(v.begin(), v.end());
  CHECK(v == iota(0, 1000));
  CHECK(build_shuffle_index(1000, 1000, true, 7) == a);
  CHECK_FALSE(build_shuffle_index(1000, 1000, true, 8) == a);
  CHECK(values(build_shuffle_index(10, 10, false, 7)) == iota(0, 10));

  // Separate final part: [0, 600) and [600, 1000) are permuted apart.
  const IndexArray s = build_shuffle_index(1000, 600, true, 7);
  auto head = values(s, 0, 600), tail = values(s, 600, 1000);
  CHECK(head != iota(0, 600));
  std::sort(head.begin(), head.end());
  std::sort(tail.begin(), tail.end());
  CHECK(head == iota(0, 600));
  CHECK(tail == iota(600, 1000));

  // Every position is reachable: over seeds, element 0 lands in each of 8 places.
  std::vector<int> seen(8, 0);
  for (uint64_t seed = 0; seed < 400; ++seed) {
    const IndexArray p = build_shuffle_index(8, 8, true, seed);
    for (int64_t i = 0; i < 8; ++i) {
      if (p[i] == 0) ++seen[static_cast<size_t>(i)];
    }
  }
  for (int c : seen) CHECK(c > 20);  // 50 expected each
}

TEST_CASE("separate final epoch: Megatron's 80% rule") {
  // T = 101 tokens, S = 10: 10 samples per epoch ((101-1)/10); int(0.8 * 10) = 8.
  CHECK_FALSE(separate_final_epoch(1, 101, 5, 10));
  // E = 2; samples before the final epoch: (101 - 1) / 10 = 10.
  CHECK(num_epochs_for(101, 11, 10) == 2);
  CHECK(separate_final_epoch(2, 101, 11, 10));        // 1 of the final epoch's samples needed
  CHECK(separate_final_epoch(2, 101, 17, 10));        // 7 < 8
  CHECK_FALSE(separate_final_epoch(2, 101, 18, 10));  // 8 is not < 8
  CHECK_FALSE(separate_final_epoch(2, 101, 20, 10));
}

TEST_CASE("the header's worked example") {
  test::TempDir dir;
  IndexedDatasetBuilder b(dir.file("ex"), TokenType::kUInt16);
  b.add_document(std::vector<int32_t>{1, 2, 3});
  b.add_document(std::vector<int32_t>{4, 5});
  b.finish();
  auto ds = IndexedDataset::open(dir.file("ex"));
  const IndexArray doc = build_document_index({0, 2}, 2, false, 0);
  CHECK(values(doc) == std::vector<int64_t>{0, 1, 0, 1});
  const IndexArray s = build_sample_index(*ds, doc, 2, 4, 3);
  CHECK(values(s) == std::vector<int64_t>{0, 0, 0, 2, 1, 1, 2, 1, 3, 0});
}

TEST_CASE("sample boundaries tile the document stream - overlapping by one token") {
  test::TempDir dir;
  auto ds = make_corpus(dir, 40);
  const DocumentRange range{3, 37};
  const RangeTokens rt = count_range_tokens(*ds, range);
  const int64_t s = GENERATE(1, 2, 5, 16, 200);
  const int64_t n = 57;
  const int64_t epochs = num_epochs_for(rt.tokens, n, s);
  const int64_t total = num_samples_of(epochs, rt.tokens, s);
  const IndexArray doc = build_document_index(range, epochs, true, 99);
  const IndexArray idx = build_sample_index(*ds, doc, s, total, rt.longest_document);
  REQUIRE(idx.size() == 2 * (total + 1));
  // The stream, flattened, with each token's (position, offset).
  std::vector<std::pair<int64_t, int64_t>> where;
  for (int64_t p = 0; p < doc.size(); ++p) {
    for (int64_t o = 0; o < ds->document_length(doc[p]); ++o) where.emplace_back(p, o);
  }
  INFO("S = " << s);
  for (int64_t i = 0; i <= total; ++i) {
    // Boundary i is stream token i*S: sample i ends where sample i+1 starts.
    const auto& w = where[static_cast<size_t>(i * s)];
    CHECK(idx[2 * i] == w.first);
    CHECK(idx[2 * i + 1] == w.second);
  }
  CHECK(static_cast<int64_t>(where.size()) >= total * s + 1);
}

}  // namespace
}  // namespace mtnlg
