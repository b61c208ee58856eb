#include "cmd/data_samples.h"

#include <memory>
#include <span>
#include <vector>

#include "core/checked_math.h"
#include "core/metrics.h"
#include "core/status.h"
#include "data/dataset_builder.h"
#include "data/gpt2_tokenizer.h"
#include "data/token_check.h"
#include "optim/batch_ramp.h"

namespace mtnlg {

int64_t split_num_samples(const Recipe& r, Split which) {
  const int64_t global = r.batch.global_batch_size;
  switch (which) {
    case Split::kTrain:
      return run_length(r).tokens / r.model.seq_length;
    case Split::kValid: {
      if (r.eval.interval <= 0)
        throw invalid_argument(
            "eval.interval is 0: the run never evaluates, so it reads no valid samples; set "
            "eval.interval (e.g. --set eval.interval=100) to see the order it would read them in",
            "eval.interval");
      const int64_t evaluations = run_length(r).iterations / r.eval.interval + 1;
      return checked_mul(
          checked_mul(evaluations, r.eval.iters, "evaluations x eval.iters", "eval.iters"), global,
          "evaluations (schedule / eval.interval) x eval.iters x batch.global_batch_size",
          "eval.iters");
    }
    case Split::kTest:
      if (r.eval.iters <= 0)
        throw invalid_argument(
            "eval.iters is 0: the test split is sized as eval.iters global batches (Megatron's "
            "test_iters = eval_iters); set eval.iters (e.g. --set eval.iters=10)",
            "eval.iters");
      return checked_mul(r.eval.iters, global, "eval.iters x batch.global_batch_size",
                         "eval.iters");
  }
  return 0;
}

void print_samples(const Recipe& r, const SampleQuery& q, std::ostream& out) {
  if (q.start < 0)
    throw invalid_argument("--start " + std::to_string(q.start) + " is negative", "--start");
  if (q.count < 1)
    throw invalid_argument("--count " + std::to_string(q.count) + ": give at least 1", "--count");
  // The trainer's own check (data/token_check.h): a recipe mtnlg-train refuses for an id at or
  // above model.vocab_size is refused here too, not printed.
  check_token_ids(r.data, r.model.vocab_size);
  const int64_t seq = r.model.seq_length;
  const int64_t size = split_num_samples(r, q.split);
  const std::unique_ptr<SampleSource> source = build_train_dataset(r.data, seq, size, q.split);
  if (!source)
    throw invalid_argument(std::string("the ") + split_name(q.split) +
                               " split has no documents in any data.blend entry; raise its "
                               "share of data.split",
                           "data.split");
  // The run reads `size` samples; the source may hold a few more (a blend's margin), which the
  // run never reaches.
  if (q.start >= size || q.count > size - q.start)
    throw invalid_argument(
        "--start " + std::to_string(q.start) + " --count " + std::to_string(q.count) +
            " passes the end of the " + split_name(q.split) + " samples this recipe reads (" +
            std::to_string(size) + "); ask for samples below " + std::to_string(size),
        q.start >= size ? "--start" : "--count");
  std::shared_ptr<const Gpt2Tokenizer> tokenizer;
  if (q.format == SampleFormat::kText) tokenizer = Gpt2Tokenizer::load(q.vocab_file, q.merge_file);
  std::vector<int32_t> ids(static_cast<size_t>(seq + 1));
  std::string line;
  for (int64_t i = q.start; i < q.start + q.count; ++i) {
    source->sample(i, ids.data());
    line.clear();
    if (tokenizer) {
      // A sample may start or end inside a character's bytes: json_string makes those U+FFFD,
      // as Hugging Face's GPT-2 decode (errors="replace") shows them.
      line = json_string(tokenizer->decode(std::span<const int32_t>(ids)));
    } else {
      for (size_t t = 0; t < ids.size(); ++t) {
        if (t > 0) line += ' ';
        line += std::to_string(ids[t]);
      }
    }
    line += '\n';
    out << line;
  }
  out.flush();
}

}  // namespace mtnlg
