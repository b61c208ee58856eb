#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "core/status.h"
#include "data/loader.h"
#include "data/sample_source.h"
#include "test_util.h"

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
    ++drawn_;
    for (int64_t t = 0; t <= seq_; ++t) out[t] = static_cast<int32_t>(i * 1000 + t);
    if (i == bad_sample_) out[1] = 1 << 30;
  }
  void check_vocab(int64_t) const override {}
  std::string description() const override { return "{\"counting\": true}"; }
  int64_t samples_drawn() const { return drawn_.load(); }

 private:
  int64_t size_, seq_;
  int32_t bad_sample_;
  mutable std::atomic<int64_t> drawn_{0};
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

// What `dp` loaders starting at `consumed` hand out over `iterations` iterations:
// out[iteration][rank] = the sample indices that rank trained on, in the order it got them.
using Drawn = std::vector<std::vector<std::vector<int64_t>>>;
Drawn drawn(const SampleSource& src, int64_t micro, int64_t dp, int64_t consumed,
            int64_t iterations, const std::function<int64_t(int64_t)>& batch_at) {
  std::vector<std::unique_ptr<Loader>> loaders;
  for (int64_t r = 0; r < dp; ++r)
    loaders.push_back(std::make_unique<Loader>(src, options(micro, r, dp), consumed, batch_at));
  Drawn out;
  for (int64_t it = 0; it < iterations; ++it) {
    const int64_t global = batch_at(consumed);
    std::vector<std::vector<int64_t>> per_rank(static_cast<size_t>(dp));
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
          per_rank[static_cast<size_t>(r)].push_back(index);
        }
      }
    }
    consumed += global;
    out.push_back(std::move(per_rank));
  }
  return out;
}

// The documented split, written out independently of the loader: the iteration that starts at
// `consumed` with global batch G gives rank r, in micro-step s, samples
// consumed + s*micro*dp + r*micro + [0, micro).
std::vector<int64_t> expected_slice(int64_t consumed, int64_t global, int64_t micro, int64_t dp,
                                    int64_t rank) {
  std::vector<int64_t> out;
  for (int64_t s = 0; s < global / (micro * dp); ++s)
    for (int64_t j = 0; j < micro; ++j) out.push_back(consumed + s * micro * dp + rank * micro + j);
  return out;
}

}  // namespace

TEST_CASE("micro-batches cover each global batch in order - rank r takes the r-th slice") {
  CountingSource src(1000);
  const auto fixed = [](int64_t) { return int64_t{8}; };
  const Drawn it = drawn(src, 2, 2, 0, 3, fixed);
  REQUIRE(it.size() == 3);
  // micro-steps of micro x dp = 4 samples; rank 0 gets the first 2 of each, rank 1 the next 2.
  CHECK(it[0][0] == std::vector<int64_t>{0, 1, 4, 5});
  CHECK(it[0][1] == std::vector<int64_t>{2, 3, 6, 7});
  CHECK(it[2][0] == std::vector<int64_t>{16, 17, 20, 21});
  CHECK(it[2][1] == std::vector<int64_t>{18, 19, 22, 23});
}

TEST_CASE("a resumed run continues with exactly the next sample - whatever the dp size") {
  CountingSource src(10000);
  // A batch ramp in samples: 4, 8, then 16 from sample 24 on.
  const auto ramp = [](int64_t consumed) -> int64_t {
    return consumed < 8 ? 4 : consumed < 24 ? 8 : 16;
  };
  // Uninterrupted at dp 1 (micro 2): iteration i covers the consecutive samples it starts at.
  const Drawn all = drawn(src, 2, 1, 0, 6, ramp);
  std::vector<int64_t> starts{0};
  for (int i = 0; i < 6; ++i) starts.push_back(starts.back() + ramp(starts.back()));
  REQUIRE(starts == std::vector<int64_t>{0, 4, 8, 16, 24, 40, 56});
  for (size_t i = 0; i < all.size(); ++i)
    CHECK(all[i][0] == expected_slice(starts[i], ramp(starts[i]), 2, 1, 0));
  // Stopped after 3 iterations (4 + 4 + 8 = 16 samples), resumed at dp 2 and at dp 4: every
  // rank's slice of every later iteration is the documented one, the iteration boundaries fall
  // where the ramp puts them (checked in drawn()), and together the ranks cover exactly what the
  // uninterrupted run covered.
  for (int64_t dp : {2, 4}) {
    INFO("resumed at dp " << dp);
    const Drawn resumed = drawn(src, 2, dp, 16, 3, ramp);
    for (size_t i = 0; i < resumed.size(); ++i) {
      INFO("iteration " << i + 3);
      const int64_t start = starts[i + 3];
      std::vector<int64_t> covered;
      for (int64_t r = 0; r < dp; ++r) {
        INFO("data rank " << r);
        const auto& got = resumed[i][static_cast<size_t>(r)];
        CHECK(got == expected_slice(start, ramp(start), 2, dp, r));
        covered.insert(covered.end(), got.begin(), got.end());
      }
      std::sort(covered.begin(), covered.end());
      CHECK(covered == all[i + 3][0]);
    }
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
  for (int i = 0; i < 5; ++i) {
    CountingSource src(1 << 20);
    LoaderOptions o = options(1, 0, 1);
    o.prefetch = 4;
    auto loader = std::make_unique<Loader>(src, o, 0, [](int64_t) { return int64_t{1}; });
    CHECK(loader->next().first_sample == 0);
    // Wait until the prefetch thread has filled the queue and blocks: 1 taken, 4 queued, and 1
    // made and waiting for room.
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (src.samples_drawn() < 6 && std::chrono::steady_clock::now() < give_up)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    REQUIRE(src.samples_drawn() == 6);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    CHECK(src.samples_drawn() == 6);  // bounded: it does not run ahead of `prefetch`
    test::Watchdog watchdog(60, "~Loader with a full prefetch queue");
    loader.reset();
  }
}
