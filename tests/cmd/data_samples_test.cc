// mtnlg-data samples (cmd/data_samples.h): the samples it prints are the ones the run reads, in
// the order it reads them, for any data-parallel size; --start pages through the same stream;
// --format text is the GPT-2 decode of the same ids; bad ranges name the flag.
#include <catch2/catch.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "checkpoint/json_parse.h"
#include "cmd/data_samples.h"
#include "core/logging.h"
#include "core/status.h"
#include "data/dataset_builder.h"
#include "data/gpt2_tokenizer.h"
#include "data/loader.h"
#include "data/unicode_classes.h"
#include "optim/batch_ramp.h"
#include "test_util.h"
#include "tiny_corpus.h"

using namespace mtnlg;

namespace {

// configs/tiny.yaml over a two-corpus blend, shuffled as Megatron shuffles (so the sizes, the
// blend and the shuffle all shape the order).
Recipe blend_recipe(const test::TempDir& dir, std::vector<std::string> extra = {}) {
  init_logging("warn");
  test::write_corpus(dir.file("a"), 120, 512);
  test::write_corpus(dir.file("b"), 80, 300);
  std::vector<std::string> sets = {"data.blend=[{prefix: " + dir.file("a") +
                                       ", weight: 0.7}, {prefix: " + dir.file("b") +
                                       ", weight: 0.3}]",
                                   "data.split=[90, 10, 0]",
                                   "data.cache_dir=" + dir.file("cache"),
                                   "schedule.train_iters=20",
                                   "eval.interval=10",
                                   "eval.iters=2",
                                   "data.shuffle=true",
                                   "data.seed=1234"};
  sets.insert(sets.end(), extra.begin(), extra.end());
  return load_recipe(test::source_path("configs/tiny.yaml"), sets);
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

std::string printed(const Recipe& r, SampleQuery q) {
  std::ostringstream out;
  print_samples(r, q, out);
  return out.str();
}

// The ids line of one loader row: the S inputs, then the last target.
std::string row_line(const MicroBatch& mb, int64_t row, int64_t seq) {
  std::string s;
  const int32_t* tokens = mb.tokens.data_as<int32_t>() + row * seq;
  for (int64_t t = 0; t < seq; ++t) s += std::to_string(tokens[t]) + " ";
  return s + std::to_string(mb.targets.data_as<int32_t>()[row * seq + seq - 1]);
}

}  // namespace

TEST_CASE("mtnlg-data samples prints what the run reads, in its order, for any data size") {
  test::TempDir dir;
  const Recipe r = blend_recipe(dir);
  const int64_t seq = r.model.seq_length, micro = r.parallel.micro_batch_size;
  const int64_t global = r.batch.global_batch_size;
  const int64_t iterations = 3;
  SampleQuery q;
  q.count = iterations * global;
  const std::vector<std::string> want = lines(printed(r, q));
  REQUIRE(static_cast<int64_t>(want.size()) == q.count);
  // What the trainer builds (cmd/trainer.cc build_data), read by each rank's Loader.
  const auto source =
      build_train_dataset(r.data, seq, split_num_samples(r, Split::kTrain), Split::kTrain);
  for (int64_t dp : {1, 2}) {
    INFO("data-parallel size " << dp);
    std::vector<std::unique_ptr<Loader>> loaders;
    for (int64_t rank = 0; rank < dp; ++rank) {
      LoaderOptions o;
      o.micro_batch_size = micro;
      o.data_rank = rank;
      o.data_size = dp;
      o.vocab_size = r.model.vocab_size;
      loaders.push_back(
          std::make_unique<Loader>(*source, o, 0, [global](int64_t) { return global; }));
    }
    // Each micro-step takes micro x dp consecutive samples, rank r the r-th slice.
    std::vector<std::string> got;
    for (int64_t step = 0; step < iterations * global / (micro * dp); ++step)
      for (auto& loader : loaders) {
        const MicroBatch mb = loader->next();
        for (int64_t row = 0; row < micro; ++row) got.push_back(row_line(mb, row, seq));
      }
    CHECK(got == want);
  }
  // --start pages through the same stream.
  q.start = 5;
  q.count = 7;
  const std::vector<std::string> page = lines(printed(r, q));
  CHECK(page == std::vector<std::string>(want.begin() + 5, want.begin() + 12));
}

TEST_CASE("mtnlg-data samples sizes each split as the run does") {
  test::TempDir dir;
  const Recipe r = blend_recipe(dir);
  const int64_t global = r.batch.global_batch_size;
  CHECK(split_num_samples(r, Split::kTrain) == run_length(r).tokens / r.model.seq_length);
  CHECK(split_num_samples(r, Split::kTrain) == 20 * global);
  // Evaluations after iterations 10 and 20, and one more: 3 x eval.iters x global.
  CHECK(split_num_samples(r, Split::kValid) == 3 * 2 * global);
  CHECK(split_num_samples(r, Split::kTest) == 2 * global);
  const Recipe quiet = blend_recipe(dir, {"eval.interval=0"});
  CHECK_THROWS_WITH(split_num_samples(quiet, Split::kValid), Catch::Contains("eval.interval"));
  // Another sizing is another order: train samples 0.. differ when the run is much longer.
  SampleQuery q;
  q.count = 16;
  const Recipe longer = blend_recipe(dir, {"schedule.train_iters=2000"});
  CHECK(printed(r, q) != printed(longer, q));
}

TEST_CASE("mtnlg-data samples --format text is the GPT-2 decode of the ids") {
  test::TempDir dir;
  const Recipe r = blend_recipe(dir);
  SampleQuery ids_q;
  ids_q.split = Split::kValid;
  ids_q.count = 4;
  SampleQuery text_q = ids_q;
  text_q.format = SampleFormat::kText;
  text_q.vocab_file = test::source_path("data/gpt2/encoder.json");
  text_q.merge_file = test::source_path("data/gpt2/vocab.bpe");
  const std::vector<std::string> ids = lines(printed(r, ids_q));
  const std::vector<std::string> texts = lines(printed(r, text_q));
  REQUIRE(ids.size() == 4);
  REQUIRE(texts.size() == 4);
  const auto tokenizer = Gpt2Tokenizer::load(text_q.vocab_file, text_q.merge_file);
  for (size_t i = 0; i < ids.size(); ++i) {
    std::vector<int32_t> v;
    std::istringstream in(ids[i]);
    for (int32_t id; in >> id;) v.push_back(id);
    CHECK(static_cast<int64_t>(v.size()) == r.model.seq_length + 1);
    const JsonValue parsed = parse_json(texts[i], "a --format text line");
    REQUIRE(parsed.is_string());
    // Bytes of a character cut at a sample's ends (and the corpus's random ids) read as U+FFFD.
    CHECK(parsed.text == replace_invalid_utf8(tokenizer->decode(v)));
  }
}

TEST_CASE("mtnlg-data samples names the flag of a range past the split's end") {
  test::TempDir dir;
  const Recipe r = blend_recipe(dir);
  const int64_t size = split_num_samples(r, Split::kTrain);
  SampleQuery q;
  q.start = size;
  q.count = 1;
  CHECK_THROWS_WITH(printed(r, q),
                    Catch::Contains("--start") && Catch::Contains(std::to_string(size)));
  q.start = size - 2;
  q.count = 3;
  CHECK_THROWS_WITH(printed(r, q), Catch::Contains("--count"));
  q.count = 2;
  CHECK(lines(printed(r, q)).size() == 2);
  q.count = 0;
  CHECK_THROWS_WITH(printed(r, q), Catch::Contains("--count"));
  // A split without documents.
  const Recipe no_test = blend_recipe(dir, {"data.split=[90, 10, 0]"});
  SampleQuery t;
  t.split = Split::kTest;
  t.count = 1;
  CHECK_THROWS_WITH(printed(no_test, t), Catch::Contains("data.split"));
}
