// Tests for data/blended_dataset.h and data/dataset_builder.h: the greedy blend keeps every
// prefix of the stream within one sample of each target share, weights are normalized and bad
// ones rejected naming data.blend[i].weight, sources are sized with the 0.5% margin, and the
// builder returns a GPTDataset, a BlendedDataset (cached) or nothing for an empty eval split.
#include "data/blended_dataset.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "core/status.h"
#include "data/dataset_builder.h"
#include "data/indexed_dataset_builder.h"
#include "data/shuffled_gpt_dataset.h"
#include "test_util.h"

namespace mtnlg {
namespace {

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

// `n` documents of 5 tokens, all tokens equal to `tag` (so a sample names its dataset).
std::string make_corpus(const test::TempDir& dir, const std::string& name, int32_t tag, int n) {
  IndexedDatasetBuilder b(dir.file(name), TokenType::kInt32);
  for (int d = 0; d < n; ++d) b.add_document(std::vector<int32_t>(5, tag));
  b.finish();
  return dir.file(name);
}

TEST_CASE("every prefix of the blend is within one sample of each target share") {
  const std::vector<std::vector<double>> cases = {
      {1.0}, {0.5, 0.5}, {0.7, 0.2, 0.1}, {0.01, 0.99}, {0.3, 0.3, 0.3, 0.1}, {1, 2, 3, 4, 5}};
  for (const auto& raw : cases) {
    const std::vector<double> w = normalize_blend_weights(raw);
    const int64_t size = 5000;
    const BlendingIndices b = build_blending_indices(w, size);
    std::vector<int64_t> count(w.size(), 0);
    for (int64_t i = 0; i < size; ++i) {
      const auto k = static_cast<size_t>(b.dataset_index[i]);
      CHECK(b.dataset_sample_index[i] == count[k]);  // each source read in its own order
      ++count[k];
      for (size_t j = 0; j < w.size(); ++j) {
        const double err = static_cast<double>(count[j]) - w[j] * static_cast<double>(i + 1);
        if (std::fabs(err) > 1.0) FAIL("prefix " << i + 1 << ", dataset " << j << ": " << err);
      }
    }
  }
  // Ties go to the lowest index.
  const BlendingIndices even = build_blending_indices({0.5, 0.5}, 4);
  CHECK(even.dataset_index[0] == 0);
  CHECK(even.dataset_index[1] == 1);
}

TEST_CASE("weights are normalized - non-positive ones are rejected by name") {
  const auto w = normalize_blend_weights({2.0, 6.0});
  CHECK(w[0] == Approx(0.25));
  CHECK(w[1] == Approx(0.75));
  for (double bad : {0.0, -1.0, std::nan("")}) {
    const Error e = error_of([&] { normalize_blend_weights({1.0, 2.0, bad}); });
    CHECK(e.code() == Code::kInvalidArgument);
    CHECK(e.context() == "data.blend[2].weight");
  }
  CHECK(error_of([] { normalize_blend_weights({}); }).context() == "data.blend");
}

// The index element by element, as Megatron's helpers.cpp build_blending_indices gives it (sample
// i goes to the dataset with the largest weight x max(i, 1) - samples so far, the lowest index
// on ties; transcribed in Python without FMA to make these): i + 1 in place of max(i, 1), or a
// fused multiply-subtract that breaks a tie the other way, changes these sequences.
TEST_CASE("the blending index matches Megatron's rule element by element") {
  const std::vector<std::pair<std::vector<double>, std::vector<int64_t>>> cases = {
      {{0.37, 0.43, 0.2}, {1, 0, 2, 1, 0, 1, 0, 2, 1, 0, 1, 2, 0, 1, 0, 1, 2, 1, 0, 1}},
      {{0.29, 0.47, 0.24}, {1, 0, 2, 1, 0, 1, 2, 1, 0, 1, 2, 0, 1, 2, 1, 0, 1, 2, 1, 0}},
      {{0.13, 0.87}, {1, 0, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1}},
      {{0.61, 0.39}, {0, 1, 0, 1, 0, 0, 1, 0, 1, 0, 0, 1, 0, 1, 0, 0, 1, 0, 1, 0}},
      {{0.5, 0.5}, {0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1}},
  };
  for (const auto& [weights, want] : cases) {
    INFO("weights " << weights[0] << ", " << weights[1]);
    const BlendingIndices got = build_blending_indices(weights, 20);
    // Megatron's dtypes: numpy int16 dataset ids, int64 positions.
    CHECK(got.dataset_index.type() == IndexType::kInt16);
    CHECK(got.dataset_sample_index.type() == IndexType::kInt64);
    std::vector<int64_t> seen(weights.size(), 0);
    for (int64_t i = 0; i < 20; ++i) {
      INFO("sample " << i);
      CHECK(got.dataset_index[i] == want[static_cast<size_t>(i)]);
      // Each dataset's samples are taken in order: the k-th time it is chosen, its sample k.
      CHECK(got.dataset_sample_index[i] ==
            seen[static_cast<size_t>(want[static_cast<size_t>(i)])]++);
    }
  }
}

TEST_CASE("sources are sized as Megatron's builder sizes them - the blend's length too") {
  CHECK(blend_target_samples(0.3, 10) == 3);
  CHECK(blend_target_samples(0.7, 3) == 3);       // ceil(2.1)
  CHECK(blend_source_samples(0.5, 1000) == 503);  // ceil(500 x 1.005)
  CHECK(blend_source_samples(0.25, 400) == 101);  // ceil(100 x 1.005)
  CHECK(blend_source_samples(1.0, 200000) == 201000);
  CHECK(blend_source_samples(0.3, 10) == 4);  // ceil(3 x 1.005)
  CHECK(blend_source_samples(0.7, 3) == 4);   // ceil(ceil(2.1) x 1.005); ceil(2.1 x 1.005) = 3
  CHECK(blend_size({0.3, 0.7}, 10) == 3 + 7);
  CHECK(blend_size({0.7, 0.3}, 3) == 3 + 1);  // past the 3 asked for
}

TEST_CASE("build_train_dataset: one entry - a cached blend - and empty eval splits") {
  test::TempDir dir;
  DataConfig cfg;
  cfg.cache_dir = dir.file("cache");
  cfg.split = {90, 10, 0};
  cfg.blend = {{make_corpus(dir, "a", 1, 40), 1.0}};

  auto single = build_train_dataset(cfg, 8, 30, Split::kTrain);
  REQUIRE(single != nullptr);
  CHECK(dynamic_cast<GPTDataset*>(single.get()) != nullptr);
  CHECK(single->size() >= 30);
  CHECK(build_train_dataset(cfg, 8, 30, Split::kTest) == nullptr);

  cfg.blend.push_back({make_corpus(dir, "b", 2, 40), 3.0});
  auto blend = build_train_dataset(cfg, 8, 200, Split::kTrain);
  auto* blended = dynamic_cast<BlendedDataset*>(blend.get());
  REQUIRE(blended != nullptr);
  CHECK_FALSE(blended->built_from_cache());
  REQUIRE(blended->size() == 200);
  CHECK(blended->source(0).size() >= blend_source_samples(0.25, 200));
  CHECK(blended->source(1).size() >= blend_source_samples(0.75, 200));
  std::vector<int32_t> out(9);
  int64_t from_b = 0;
  for (int64_t i = 0; i < 200; ++i) {
    blend->sample(i, out.data());
    CHECK(out.front() == out.back());  // one dataset per sample
    from_b += out.front() == 2;
  }
  CHECK(from_b == 150);

  auto again = build_train_dataset(cfg, 8, 200, Split::kTrain);
  CHECK(dynamic_cast<BlendedDataset*>(again.get())->built_from_cache());
  std::vector<int32_t> out2(9);
  for (int64_t i = 0; i < 200; ++i) {
    blend->sample(i, out.data());
    again->sample(i, out2.data());
    CHECK(out == out2);
  }

  cfg.blend[1].weight = 0.0;
  CHECK(error_of([&] { build_train_dataset(cfg, 8, 200, Split::kTrain); }).context() ==
        "data.blend[1].weight");
  cfg.blend[1].weight = 1.0;
  CHECK(error_of([&] { build_train_dataset(cfg, 8, 0, Split::kTrain); }).code() ==
        Code::kInvalidArgument);
  // A valid split empty in one entry only (3 documents give it none) is an error.
  cfg.blend[1].prefix = make_corpus(dir, "tiny", 3, 3);
  CHECK(error_of([&] { build_train_dataset(cfg, 8, 20, Split::kValid); }).context() ==
        "data.blend[1]");
  // A dataset without documents is named as the data's fault, not data.split's.
  cfg.blend[1].prefix = make_corpus(dir, "empty", 4, 0);
  const Error empty = error_of([&] { build_train_dataset(cfg, 8, 20, Split::kTrain); });
  CHECK(empty.context() == "data.blend[1].prefix");
  CHECK_THAT(empty.message(), Catch::Contains("holds no (non-empty) documents"));
}

TEST_CASE("a source too small for its share is rejected") {
  test::TempDir dir;
  auto ids = IndexedDataset::open(make_corpus(dir, "a", 1, 10));
  GPTDatasetConfig c;
  c.seq_length = 4;
  c.num_samples = 5;
  std::vector<std::unique_ptr<SampleSource>> sources;
  sources.push_back(std::make_unique<GPTDataset>(ids, DocumentRange{0, 10}, c));
  sources.push_back(std::make_unique<GPTDataset>(ids, DocumentRange{0, 10}, c));
  // 12 samples each exist ((50 - 1) / 4); a blend of 100 needs 50 each.
  const Error e = error_of([&] { BlendedDataset b(std::move(sources), {1, 1}, 100, ""); });
  CHECK(e.context() == "data.blend");
}

}  // namespace
}  // namespace mtnlg
