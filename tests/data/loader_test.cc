#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "core/status.h"
#include "data/loader.h"
#include "data/sample_source.h"

using namespace mtnlg;

namespace {

// Sample i is [i*1000, i*1000 + 1, ...]: every token says which sample it came from.
class CountingSource : public SampleSource {
 public:
  explicit CountingSource(int64_t size, int64_t seq = 4, int32_t bad_sample = -1)
      : size_(size), seq_(seq), bad_sample_(bad_sample) {}
  int64_t size() const override { return size_; }
  int64_t seq_length() const override { return seq_; }
  void sample(int64_t i, int32_t* out) const override {
    for (int64_t t = 0; t <= seq_; ++t) out[t] = static_cast<int32_t>(i * 1000 + t);
    if (i == bad_sample_) out[1] = 1 << 30;
  }
  void check_vocab(int64_t) const override {}
  std::string description() const override { return "{\"counting\": true}"; }

 private:
  int64_t size_, seq_;
  int32_t bad_sample_;
};

LoaderOptions options(int64_t micro, int64_t rank, int64_t size) {
  LoaderOptions o;
  o.micro_batch_size = micro;
  o.data_rank = rank;
  o.data_size = size;
  o.vocab_size = 1 << 29;
  o.source_name = "counting";
  return o;
}

// The samples (by index) each iteration of `iterations` covers, gathered over all dp ranks.
std::vector<std::vector<int64_t>> drawn(const SampleSource& src, int64_t micro, int64_t dp,
                                        int64_t consumed, int64_t iterations,
                                        const std::function<int64_t(int64_t)>& batch_at) {
  std::vector<std::unique_ptr<Loader>> loaders;
  for (int64_t r = 0; r < dp; ++r)
    loaders.push_back(std::make_unique<Loader>(src, options(micro, r, dp), consumed, batch_at));
  std::vector<std::vector<int64_t>> out;
  for (int64_t it = 0; it < iterations; ++it) {
    const int64_t global = batch_at(consumed);
    std::vector<int64_t> samples;
    for (int64_t step = 0; step < global / (micro * dp); ++step) {
      for (int64_t r = 0; r < dp; ++r) {
        const MicroBatch mb = loaders[static_cast<size_t>(r)]->next();
        CHECK(mb.last_of_iteration == (step == global / (micro * dp) - 1));
        const int32_t* tok = mb.tokens.data_as<int32_t>();
        const int32_t* tgt = mb.targets.data_as<int32_t>();
        for (int64_t j = 0; j < micro; ++j) {
          const int64_t index = tok[j * src.seq_length()] / 1000;
          CHECK(index == mb.first_sample + j);
          CHECK(tgt[j * src.seq_length()] == tok[j * src.seq_length()] + 1);  // shifted by one
          samples.push_back(index);
        }
      }
    }
    consumed += global;
    out.push_back(samples);
  }
  return out;
}

}  // namespace

TEST_CASE("micro-batches cover each global batch in order - rank r takes the r-th slice") {
  CountingSource src(1000);
  const auto fixed = [](int64_t) { return int64_t{8}; };
  const auto it = drawn(src, 2, 2, 0, 3, fixed);
  REQUIRE(it.size() == 3);
  // micro-steps of micro x dp = 4 samples; rank 0 gets the first 2 of each, rank 1 the next 2.
  CHECK(it[0] == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(it[2] == std::vector<int64_t>{16, 17, 18, 19, 20, 21, 22, 23});
}

TEST_CASE("a resumed run continues with exactly the next sample - whatever the dp size") {
  CountingSource src(10000);
  // A batch ramp in samples: 4, 8, then 16 from sample 24 on.
  const auto ramp = [](int64_t consumed) -> int64_t {
    return consumed < 8 ? 4 : consumed < 24 ? 8 : 16;
  };
  const auto flatten = [](const std::vector<std::vector<int64_t>>& v) {
    std::vector<int64_t> out;
    for (const auto& x : v) out.insert(out.end(), x.begin(), x.end());
    return out;
  };
  // Uninterrupted: dp 1, 6 iterations.
  const auto all = flatten(drawn(src, 2, 1, 0, 6, ramp));
  // Stopped after 3 iterations (4 + 4 + 8 = 16 samples), resumed at dp 2 and at dp 4 (micro 2).
  const auto first = flatten(drawn(src, 2, 1, 0, 3, ramp));
  REQUIRE(first.size() == 16);
  for (int64_t dp : {2, 4}) {
    INFO("resumed at dp " << dp);
    auto resumed = flatten(drawn(src, 2, dp, 16, 3, ramp));
    std::vector<int64_t> joined = first;
    joined.insert(joined.end(), resumed.begin(), resumed.end());
    std::sort(joined.begin() + 16, joined.end());  // within an iteration ranks interleave
    CHECK(joined == all);
  }
}

TEST_CASE("a bad token id in the prefetch thread surfaces from next() naming the source") {
  CountingSource src(100, 4, /*bad_sample=*/5);
  LoaderOptions o = options(2, 0, 1);
  o.vocab_size = 1 << 20;
  Loader loader(src, o, 0, [](int64_t) { return int64_t{2}; });
  loader.next();
  loader.next();
  try {
    loader.next();  // samples 4 and 5
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(e.context() == "counting");
    CHECK(std::string(e.what()).find("model.vocab_size") != std::string::npos);
  }
}

TEST_CASE("running past the end of a finite source is an error with the fix") {
  CountingSource src(6);
  Loader loader(src, options(2, 0, 1), 0, [](int64_t) { return int64_t{4}; });
  loader.next();
  loader.next();
  loader.next();
  CHECK_THROWS_WITH(loader.next(), Catch::Contains("data.cache_dir"));
}

TEST_CASE("destroying a loader with a full prefetch queue does not hang") {
  CountingSource src(1 << 20);
  for (int i = 0; i < 5; ++i) {
    Loader loader(src, options(1, 0, 1), 0, [](int64_t) { return int64_t{1}; });
    loader.next();
  }
  SUCCEED();
}
