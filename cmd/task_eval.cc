#include "cmd/task_eval.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/status.h"
#include "data/json_reader.h"
#include "data/tasks/fewshot_sampler.h"
#include "data/tasks/prompt.h"
#include "data/tasks/requests.h"

namespace mtnlg {
namespace {

struct Split {
  std::vector<std::string> lines, texts;  // the records as written, their "text"
};

Split read_split(const std::string& dir, const std::string& task, const std::string& split) {
  const std::string path = (std::filesystem::path(dir) / task / (split + ".jsonl")).string();
  std::ifstream in(path);
  if (!in)
    throw not_found("cannot read " + path + ": export the harness's " + task + " " + split +
                        " split there as JSON Lines (one document a line, its dataset fields)",
                    path);
  Split s;
  std::string line, text;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    JsonFieldStatus st;
    try {
      st = parse_json_string_field(line, "text", &text);
    } catch (const Error& e) {
      throw invalid_argument("not a JSON object: " + e.message(), path + ":" + std::to_string(n));
    }
    if (st != JsonFieldStatus::kFound)
      throw invalid_argument("the document has no string \"text\" member", path + ":" + std::to_string(n));
    s.lines.push_back(line);
    s.texts.push_back(text);
  }
  if (s.texts.empty()) throw invalid_argument(path + " holds no documents", path);
  return s;
}

double log_softmax_at(const float* logits, int64_t vocab, int32_t token, bool* is_max) {
  float max = logits[0];
  int64_t arg = 0;
  for (int64_t v = 1; v < vocab; ++v)
    if (logits[v] > max) {
      max = logits[v];
      arg = v;
    }
  double sum = 0;
  for (int64_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(logits[v]) - max);
  *is_max = arg == token;
  return static_cast<double>(logits[token]) - max - std::log(sum);
}

}  // namespace

std::vector<std::string> known_tasks() { return {"lambada_openai", "lambada_standard"}; }

Loglikelihood score_request(GPTDecoder& decoder, const Gpt2Tokenizer& tok,
                            const std::string& context, const std::string& continuation) {
  const tasks::TokenPair pair = tasks::encode_request(tok, context, continuation, tok.eod());
  const tasks::ModelInput in = tasks::causal_input(pair, decoder.max_tokens());
  decoder.reset();
  const std::vector<float> logits = decoder.feed_rows(in.tokens, in.first_scored);
  const int64_t vocab = decoder.vocab();
  Loglikelihood r;
  r.greedy = true;
  for (size_t j = 0; j < pair.continuation.size(); ++j) {
    bool is_max = false;
    r.logprob += log_softmax_at(logits.data() + static_cast<int64_t>(j) * vocab, vocab,
                                pair.continuation[j], &is_max);
    r.greedy = r.greedy && is_max;
  }
  return r;
}

TaskMetrics run_task(const std::string& task, GPTDecoder& decoder, const Gpt2Tokenizer& tok,
                     const TaskOptions& o) {
  const auto known = known_tasks();
  if (std::find(known.begin(), known.end(), task) == known.end()) {
    std::string names;
    for (const std::string& k : known) {
      if (!names.empty()) names += ", ";
      names += k;
    }
    throw invalid_argument("unknown task '" + task + "': the tasks built so far are " + names +
                               " (docs/evaluation.md)",
                           "--tasks");
  }
  if (o.num_fewshot < 0) throw invalid_argument("--num-fewshot must be 0 or more", "--num-fewshot");
  const Split eval = read_split(o.task_dir, task, "test");
  const bool same_split = task == "lambada_openai";
  const Split shots = o.num_fewshot == 0 ? Split{}
                      : same_split       ? eval
                                         : read_split(o.task_dir, task, "validation");
  tasks::FewshotSampler sampler(o.fewshot_seed);
  TaskMetrics m;
  m.task = task;
  m.num_fewshot = o.num_fewshot;
  m.available = static_cast<int64_t>(eval.texts.size());
  const int64_t n = o.limit > 0 ? std::min(o.limit, m.available) : m.available;
  std::vector<double> logprobs, greedy;
  for (int64_t i = 0; i < n; ++i) {
    const tasks::QaPair doc = tasks::lambada_pair(eval.texts[static_cast<size_t>(i)]);
    std::vector<tasks::QaPair> examples;
    if (o.num_fewshot > 0) {
      const std::string& line = eval.lines[static_cast<size_t>(i)];
      const auto picked = sampler.sample(
          static_cast<int64_t>(shots.texts.size()), o.num_fewshot,
          same_split ? std::function<bool(int64_t)>(
                           [&](int64_t j) { return shots.lines[static_cast<size_t>(j)] == line; })
                     : std::function<bool(int64_t)>());
      for (const int64_t j : picked)
        examples.push_back(tasks::lambada_pair(shots.texts[static_cast<size_t>(j)]));
    }
    const std::string context = tasks::fewshot_prompt(examples, doc.question);
    const Loglikelihood r = score_request(decoder, tok, context, doc.answer);
    logprobs.push_back(r.logprob);
    greedy.push_back(r.greedy ? 1.0 : 0.0);
    if ((i + 1) % 100 == 0 || i + 1 == n)
      spdlog::info("{}: {}/{} documents scored", task, i + 1, n);
  }
  m.documents = n;
  double mean_lp = 0, acc = 0;
  for (int64_t i = 0; i < n; ++i) {
    mean_lp += logprobs[static_cast<size_t>(i)];
    acc += greedy[static_cast<size_t>(i)];
  }
  mean_lp /= static_cast<double>(n);
  acc /= static_cast<double>(n);
  double ss = 0;
  for (const double g : greedy) ss += (g - acc) * (g - acc);
  m.acc = acc;
  m.acc_stderr = n > 1 ? std::sqrt(ss / static_cast<double>(n - 1)) / std::sqrt(static_cast<double>(n)) : 0.0;
  m.perplexity = std::exp(-mean_lp);
  return m;
}

}  // namespace mtnlg
