// Tests for data/gpt_indices.h: epochs, the document permutation and the shuffle permutation
// against numpy's (Megatron's functions transcribed with numpy 1.24 give the fixtures below),
// sample boundaries reconstructed from the indices, Megatron's separate-final-epoch rule, and the
// worked example of the header.
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

// sum(i * a[i]) mod 2^64: a fingerprint of a whole permutation.
uint64_t fingerprint(const IndexArray& a) {
  uint64_t f = 0;
  for (int64_t i = 0; i < a.size(); ++i)
    f += static_cast<uint64_t>(i) * static_cast<uint64_t>(a[i]);
  return f;
}

// Megatron's indices for documents [7, 57), 4 epochs, seed 1234, 1000 samples, from numpy:
//   rng = np.random.RandomState(1234)
//   doc = np.tile(np.arange(7, 57), 4).astype(np.int32); rng.shuffle(doc)     (one epoch group)
//   (separate final epoch: the first 3 copies shuffled, then the last copy, concatenated)
//   shuf = np.arange(0, first, dtype=np.uint32); rng.shuffle(shuf)  (then [first, 1000) apart)
TEST_CASE("the document and shuffle indices are Megatron's: numpy's shuffles in its order") {
  const DocumentRange range{7, 7 + 50};
  for (bool separate : {false, true}) {
    INFO("separate final epoch " << separate);
    NumpyRandomState rng(1234);
    const IndexArray doc = build_document_index(range, 4, separate, true, rng);
    const IndexArray shuf = build_shuffle_index(1000, separate ? 600 : 1000, true, rng);
    REQUIRE(doc.size() == 200);
    // Megatron's dtypes: int32 document index, uint32 shuffle index.
    CHECK(doc.type() == IndexType::kInt32);
    CHECK(shuf.type() == IndexType::kUInt32);
    if (!separate) {
      CHECK(values(doc, 0, 8) == std::vector<int64_t>{54, 14, 38, 55, 20, 16, 12, 14});
      CHECK(values(doc, 196, 200) == std::vector<int64_t>{23, 10, 45, 54});
      CHECK(fingerprint(doc) == 622214);
      CHECK(values(shuf, 0, 6) == std::vector<int64_t>{825, 541, 294, 686, 713, 652});
      CHECK(values(shuf, 997, 1000) == std::vector<int64_t>{316, 953, 931});
      CHECK(fingerprint(shuf) == 250746759);
    } else {
      CHECK(values(doc, 0, 8) == std::vector<int64_t>{48, 20, 10, 13, 16, 36, 34, 42});
      CHECK(values(doc, 196, 200) == std::vector<int64_t>{48, 30, 34, 26});
      CHECK(fingerprint(doc) == 629226);
      CHECK(values(shuf, 0, 6) == std::vector<int64_t>{406, 437, 146, 76, 463, 175});
      CHECK(values(shuf, 997, 1000) == std::vector<int64_t>{667, 994, 819});
      CHECK(fingerprint(shuf) == 309445647);
      // The final epoch's copy and samples are permuted apart, after the others.
      auto last = values(doc, 150, 200);
      std::sort(last.begin(), last.end());
      CHECK(last == iota(7, 57));
      auto tail = values(shuf, 600, 1000);
      std::sort(tail.begin(), tail.end());
      CHECK(tail == iota(600, 1000));
    }
    // Every epoch's documents, all together, E times each.
    auto all = values(doc);
    std::sort(all.begin(), all.end());
    std::vector<int64_t> want;
    for (int64_t d = 7; d < 57; ++d) want.insert(want.end(), 4, d);
    CHECK(all == want);
  }
  NumpyRandomState plain_rng(1234);
  const IndexArray plain = build_document_index(range, 2, false, false, plain_rng);
  auto twice = iota(7, 57);
  twice.insert(twice.end(), twice.begin(), twice.end());
  CHECK(values(plain) == twice);
  CHECK(values(build_shuffle_index(10, 10, false, plain_rng)) == iota(0, 10));
}

TEST_CASE("the shuffle index is a permutation - another seed another order") {
  NumpyRandomState a7(7), b7(7), a8(8);
  const IndexArray a = build_shuffle_index(1000, 1000, true, a7);
  auto v = values(a);
  CHECK(v != iota(0, 1000));
  std::sort(v.begin(), v.end());
  CHECK(v == iota(0, 1000));
  CHECK(build_shuffle_index(1000, 1000, true, b7) == a);
  CHECK_FALSE(build_shuffle_index(1000, 1000, true, a8) == a);

  // Every position is reachable: over seeds, element 0 lands in each of 8 places.
  std::vector<int> seen(8, 0);
  for (uint32_t seed = 0; seed < 400; ++seed) {
    NumpyRandomState rng(seed);
    const IndexArray p = build_shuffle_index(8, 8, true, rng);
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
  NumpyRandomState rng(0);
  const IndexArray doc = build_document_index({0, 2}, 2, false, false, rng);
  CHECK(values(doc) == std::vector<int64_t>{0, 1, 0, 1});
  const IndexArray s = build_sample_index(*ds, doc, 2, 4, 3);
  CHECK(values(s) == std::vector<int64_t>{0, 0, 0, 2, 1, 1, 2, 1, 3, 0});
}

TEST_CASE("sample boundaries tile the document stream - overlapping by one token") {
  test::TempDir dir;
  auto ds = make_corpus(dir, 40);  // empty documents have no sequence: 34 sequences
  const DocumentRange range{3, ds->num_sequences() - 3};
  const RangeTokens rt = count_range_tokens(*ds, range);
  const int64_t s = GENERATE(1, 2, 5, 16, 200);
  const int64_t n = 57;
  const int64_t epochs = num_epochs_for(rt.tokens, n, s);
  const int64_t total = num_samples_of(epochs, rt.tokens, s);
  NumpyRandomState rng(99);
  const IndexArray doc = build_document_index(range, epochs, false, true, rng);
  const IndexArray idx = build_sample_index(*ds, doc, s, total, rt.longest_document);
  REQUIRE(idx.size() == 2 * (total + 1));
  // The stream, flattened, with each token's (position, offset).
  std::vector<std::pair<int64_t, int64_t>> where;
  for (int64_t p = 0; p < doc.size(); ++p) {
    for (int64_t o = 0; o < ds->sequence_length(doc[p]); ++o) where.emplace_back(p, o);
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
