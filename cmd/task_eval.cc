#include "cmd/task_eval.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <tuple>

#include "core/metrics.h"
#include "core/status.h"
#include "data/json_reader.h"
#include "data/python_text.h"
#include "data/tasks/fewshot_sampler.h"
#include "data/tasks/prompt.h"
#include "data/tasks/requests.h"
#include "data/tasks/task_docs.h"
#include "data/tasks/wikitext.h"

namespace mtnlg {
namespace {

// One request's (log-likelihood, greedy) from its tokens (below).
Loglikelihood score_tokens(GPTDecoder& decoder, const tasks::TokenPair& pair);

// --log-samples: one JSON line a request, as the harness's samples keep it.
void log_request(const TaskOptions& o, const std::string& task, int64_t doc_id, int64_t request,
                 const std::string& context, const std::string& continuation,
                 const Loglikelihood& r) {
  if (o.samples == nullptr) return;
  *o.samples << JsonLine()
                    .add("task", task)
                    .add("doc_id", doc_id)
                    .add("request", request)
                    .add("context", context)
                    .add("continuation", continuation)
                    .add("loglikelihood", r.logprob)
                    .add("greedy", r.greedy)
                    .str()
             << '\n';
}

struct Split {
  std::vector<std::string> lines, texts;  // the records as written, their "text"
};

Split read_split(const std::string& dir, const std::string& task, const std::string& split,
                 bool lambada = true) {
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
    if (lambada) {
      JsonFieldStatus st;
      try {
        st = parse_json_string_field(line, "text", &text);
      } catch (const Error& e) {
        throw invalid_argument("not a JSON object: " + e.message(), path + ":" + std::to_string(n));
      }
      if (st != JsonFieldStatus::kFound)
        throw invalid_argument("the document has no string \"text\" member",
                               path + ":" + std::to_string(n));
    }
    s.lines.push_back(line);
    s.texts.push_back(lambada ? text : path + ":" + std::to_string(n));  // else: where it is
  }
  if (s.lines.empty()) throw invalid_argument(path + " holds no documents", path);
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

TaskMetrics run_wikitext(GPTDecoder& decoder, const Gpt2Tokenizer& tok, const TaskOptions& o) {
  if (o.num_fewshot != 0)
    throw invalid_argument("wikitext scores whole pages by rolling windows: --num-fewshot 0",
                           "--num-fewshot");
  const Split eval = read_split(o.task_dir, "wikitext", "test", false);
  TaskMetrics m;
  m.task = "wikitext";
  m.available = static_cast<int64_t>(eval.lines.size());
  m.has_rolling = true;
  const int64_t n = o.limit > 0 ? std::min(o.limit, m.available) : m.available;
  double ll = 0;
  int64_t words = 0, bytes = 0;
  for (int64_t i = 0; i < n; ++i) {
    std::string page;
    JsonFieldStatus st;
    try {
      st = parse_json_string_field(eval.lines[static_cast<size_t>(i)], "page", &page);
    } catch (const Error& e) {
      throw invalid_argument("not a JSON object: " + e.message(),
                             eval.texts[static_cast<size_t>(i)]);
    }
    if (st != JsonFieldStatus::kFound)
      throw invalid_argument("the document has no string \"page\" member",
                             eval.texts[static_cast<size_t>(i)]);
    Loglikelihood doc{0, true};
    const std::string text = tasks::wikitext_detokenize(page);
    for (const tasks::TokenPair& w :
         tasks::rolling_windows(tok.encode(text), tok.eod(), decoder.max_tokens())) {
      const Loglikelihood r = score_tokens(decoder, w);
      doc.logprob += r.logprob;
      doc.greedy = doc.greedy && r.greedy;
    }
    ll += doc.logprob;
    words += tasks::wikitext_words(page);
    bytes += static_cast<int64_t>(page.size());
    log_request(o, "wikitext", i, 0, "", text, doc);  // the page scored whole
    spdlog::info("wikitext: {}/{} pages scored", i + 1, n);
  }
  m.documents = n;
  m.word_perplexity = std::exp(-ll / static_cast<double>(words));
  m.byte_perplexity = std::exp(-ll / static_cast<double>(bytes));
  m.bits_per_byte = -ll / static_cast<double>(bytes) / std::log(2.0);
  return m;
}

}  // namespace

std::vector<std::string> known_tasks() {
  std::vector<std::string> names = {"lambada_openai", "lambada_standard", "wikitext"};
  for (const tasks::ChoiceTask& t : tasks::choice_tasks()) names.push_back(t.name);
  return names;
}

namespace {

// The mean of 0/1 outcomes and the harness's mean_stderr (sample standard deviation, n - 1).
std::pair<double, double> mean_stderr(const std::vector<double>& x) {
  const auto n = static_cast<double>(x.size());
  double mean = 0;
  for (const double v : x) mean += v;
  mean /= n;
  double ss = 0;
  for (const double v : x) ss += (v - mean) * (v - mean);
  return {mean, x.size() > 1 ? std::sqrt(ss / (n - 1)) / std::sqrt(n) : 0.0};
}

// A document of a multiple-choice task, naming its file and line in an error.
tasks::ChoiceDoc choice_doc_at(const tasks::ChoiceTask& t, const Split& s, size_t i) {
  try {
    return tasks::choice_doc(t, s.lines[i]);
  } catch (const Error& e) {
    throw invalid_argument(e.message() + " (member " + e.context() + ")", s.texts[i]);
  }
}

TaskMetrics run_choice_task(const tasks::ChoiceTask& t, GPTDecoder& decoder,
                            const Gpt2Tokenizer& tok, const TaskOptions& o) {
  const Split eval = read_split(o.task_dir, t.name, t.eval_split, false);
  // The few-shot examples' split; the evaluated one itself (RACE), the document then removed.
  const bool same_split = t.fewshot_split == t.eval_split;
  const Split shots = o.num_fewshot == 0 ? Split{}
                      : same_split       ? eval
                                         : read_split(o.task_dir, t.name, t.fewshot_split, false);
  tasks::FewshotSampler sampler(o.fewshot_seed);
  TaskMetrics m;
  m.task = t.name;
  m.num_fewshot = o.num_fewshot;
  m.available = static_cast<int64_t>(eval.lines.size());
  m.has_acc_norm = t.acc_norm;
  const int64_t n = o.limit > 0 ? std::min(o.limit, m.available) : m.available;
  std::vector<double> acc, acc_norm;
  for (int64_t i = 0; i < n; ++i) {
    const tasks::ChoiceDoc doc = choice_doc_at(t, eval, static_cast<size_t>(i));
    std::vector<tasks::QaPair> examples;
    const std::string& line = eval.lines[static_cast<size_t>(i)];
    const auto equals_eval = same_split ? std::function<bool(int64_t)>([&](int64_t j) {
      return shots.lines[static_cast<size_t>(j)] == line;
    })
                                        : std::function<bool(int64_t)>();
    for (const int64_t j :
         sampler.sample(static_cast<int64_t>(shots.lines.size()), o.num_fewshot, equals_eval)) {
      const tasks::ChoiceDoc ex = choice_doc_at(t, shots, static_cast<size_t>(j));
      examples.push_back({ex.example_question(), ex.example_answer()});
    }
    const std::string context = tasks::fewshot_prompt(examples, doc.question);
    size_t best = 0, best_norm = 0;
    double top = 0, top_norm = 0;
    std::vector<double> lls;
    // The choices of one context share its forward pass (score_choices).
    std::vector<Loglikelihood> shared;
    if (!doc.multiple_input) {
      std::vector<std::string> conts;
      for (const std::string& c : doc.choices) conts.push_back(" " + c);
      shared = score_choices(decoder, tok, context, conts);
    }
    for (size_t c = 0; c < doc.choices.size(); ++c) {
      // Multiple inputs: each choice is a context before the shared target.
      const std::string ctx =
          doc.multiple_input ? tasks::fewshot_prompt(examples, doc.choices[c]) : context;
      const std::string cont = " " + (doc.multiple_input ? doc.target : doc.choices[c]);
      const Loglikelihood r =
          doc.multiple_input ? score_request(decoder, tok, ctx, cont) : shared[c];
      log_request(o, t.name, i, static_cast<int64_t>(c), ctx, cont, r);
      const double ll = r.logprob;
      lls.push_back(ll);
      const double norm = ll / static_cast<double>(utf8_to_u32(doc.choices[c]).size());
      if (c == 0 || ll > top) {
        top = ll;
        best = c;
      }
      if (c == 0 || norm > top_norm) {
        top_norm = norm;
        best_norm = c;
      }
    }
    acc.push_back(static_cast<int64_t>(best) == doc.gold ? 1.0 : 0.0);
    acc_norm.push_back(static_cast<int64_t>(best_norm) == doc.gold ? 1.0 : 0.0);

    if ((i + 1) % 100 == 0 || i + 1 == n)
      spdlog::info("{}: {}/{} documents scored", t.name, i + 1, n);
  }
  m.documents = n;
  std::tie(m.acc, m.acc_stderr) = mean_stderr(acc);
  if (t.acc_norm) std::tie(m.acc_norm, m.acc_norm_stderr) = mean_stderr(acc_norm);
  return m;
}

}  // namespace

namespace {

Loglikelihood score_tokens(GPTDecoder& decoder, const tasks::TokenPair& pair) {
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

}  // namespace

Loglikelihood score_request(GPTDecoder& decoder, const Gpt2Tokenizer& tok,
                            const std::string& context, const std::string& continuation) {
  return score_tokens(decoder, tasks::encode_request(tok, context, continuation, tok.eod()));
}

std::vector<Loglikelihood> score_choices(GPTDecoder& decoder, const Gpt2Tokenizer& tok,
                                         const std::string& context,
                                         const std::vector<std::string>& continuations) {
  std::vector<tasks::TokenPair> pairs;
  bool shared = true;
  for (const std::string& c : continuations) {
    pairs.push_back(tasks::encode_request(tok, context, c, tok.eod()));
    const tasks::TokenPair& p = pairs.back();
    shared = shared && !p.context.empty() && !p.continuation.empty() &&
             p.context == pairs.front().context &&
             static_cast<int64_t>(p.context.size() + p.continuation.size()) <=
                 decoder.max_tokens() + 1;  // no truncation: the window is the whole request
  }
  std::vector<Loglikelihood> out;
  if (!shared) {
    for (const tasks::TokenPair& p : pairs) out.push_back(score_tokens(decoder, p));
    return out;
  }
  // The context but its last token once; then per continuation that token and the
  // continuation but its last, whose rows score the continuation's tokens.
  const std::vector<int32_t>& ctx = pairs.front().context;
  decoder.reset();
  if (ctx.size() > 1) decoder.feed({ctx.data(), ctx.size() - 1});
  const int64_t base = decoder.position();
  const int64_t vocab = decoder.vocab();
  for (const tasks::TokenPair& p : pairs) {
    decoder.rewind(base);
    std::vector<int32_t> in = {ctx.back()};
    in.insert(in.end(), p.continuation.begin(), p.continuation.end() - 1);
    const std::vector<float> logits = decoder.feed_rows(in, 0);
    Loglikelihood r;
    r.greedy = true;
    for (size_t j = 0; j < p.continuation.size(); ++j) {
      bool is_max = false;
      r.logprob += log_softmax_at(logits.data() + static_cast<int64_t>(j) * vocab, vocab,
                                  p.continuation[j], &is_max);
      r.greedy = r.greedy && is_max;
    }
    out.push_back(r);
  }
  return out;
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
  if (const tasks::ChoiceTask* t = tasks::find_choice_task(task))
    return run_choice_task(*t, decoder, tok, o);
  if (task == "wikitext") return run_wikitext(decoder, tok, o);
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
      const auto picked = sampler.sample(static_cast<int64_t>(shots.texts.size()), o.num_fewshot,
                                         same_split ? std::function<bool(int64_t)>([&](int64_t j) {
                                           return shots.lines[static_cast<size_t>(j)] == line;
                                         })
                                                    : std::function<bool(int64_t)>());
      for (const int64_t j : picked)
        examples.push_back(tasks::lambada_pair(shots.texts[static_cast<size_t>(j)]));
    }
    const std::string context = tasks::fewshot_prompt(examples, doc.question);
    const Loglikelihood r = score_request(decoder, tok, context, doc.answer);
    logprobs.push_back(r.logprob);
    greedy.push_back(r.greedy ? 1.0 : 0.0);
    log_request(o, task, i, 0, context, doc.answer, r);
    if ((i + 1) % 100 == 0 || i + 1 == n)
      spdlog::info("{}: {}/{} documents scored", task, i + 1, n);
  }
  m.documents = n;
  double mean_lp = 0;
  for (const double lp : logprobs) mean_lp += lp;
  mean_lp /= static_cast<double>(n);
  std::tie(m.acc, m.acc_stderr) = mean_stderr(greedy);
  m.has_perplexity = true;
  m.perplexity = std::exp(-mean_lp);
  return m;
}

}  // namespace mtnlg
