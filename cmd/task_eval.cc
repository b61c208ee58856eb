#include "cmd/task_eval.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <tuple>

#include "core/metrics.h"
#include "core/status.h"
#include "data/json_reader.h"
#include "data/python_text.h"
#include "data/tasks/bootstrap.h"
#include "data/tasks/fewshot_sampler.h"
#include "data/tasks/prompt.h"
#include "data/tasks/requests.h"
#include "data/tasks/task_docs.h"
#include "data/tasks/wikitext.h"

namespace mtnlg {
namespace {

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

TaskMetrics run_wikitext(Scorer& scorer, const Gpt2Tokenizer& tok, const TaskOptions& o) {
  if (o.num_fewshot != 0)
    throw invalid_argument("wikitext scores whole pages by rolling windows: --num-fewshot 0",
                           "--num-fewshot");
  const Split eval = read_split(o.task_dir, "wikitext", "test", false);
  TaskMetrics m;
  m.task = "wikitext";
  m.available = static_cast<int64_t>(eval.lines.size());
  m.has_rolling = true;
  const int64_t n = o.limit > 0 ? std::min(o.limit, m.available) : m.available;
  RequestSet requests(scorer.max_positions());
  std::vector<std::string> texts;
  std::vector<int64_t> first{0}, words, bytes;  // per page: its windows' requests [first, next)
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
    texts.push_back(tasks::wikitext_detokenize(page));
    for (const tasks::TokenPair& w :
         tasks::rolling_windows(tok.encode(texts.back()), tok.eod(), scorer.max_positions()))
      requests.add(w);
    first.push_back(requests.size());
    words.push_back(tasks::wikitext_words(page));
    bytes.push_back(static_cast<int64_t>(page.size()));
  }
  const std::vector<Loglikelihood> scores = requests.score(scorer, "wikitext", o.progress);
  double ll = 0;
  int64_t all_words = 0, all_bytes = 0;
  for (int64_t i = 0; i < n; ++i) {
    const auto u = static_cast<size_t>(i);
    Loglikelihood doc{0, true};
    for (int64_t r = first[u]; r < first[u + 1]; ++r) {
      doc.logprob += scores[static_cast<size_t>(r)].logprob;
      doc.greedy = doc.greedy && scores[static_cast<size_t>(r)].greedy;
    }
    ll += doc.logprob;
    all_words += words[u];
    all_bytes += bytes[u];
    log_request(o, "wikitext", i, 0, "", texts[u], doc);  // the page scored whole
  }
  m.documents = n;
  m.word_perplexity = std::exp(-ll / static_cast<double>(all_words));
  m.byte_perplexity = std::exp(-ll / static_cast<double>(all_bytes));
  m.bits_per_byte = -ll / static_cast<double>(all_bytes) / std::log(2.0);
  return m;
}

}  // namespace

void check_task_names(const std::vector<std::string>& names, const std::string& key) {
  const auto known = known_tasks();
  for (const std::string& t : names) {
    if (std::find(known.begin(), known.end(), t) != known.end()) continue;
    std::string list;
    for (const std::string& k : known) {
      if (!list.empty()) list += ", ";
      list += k;
    }
    throw invalid_argument(
        "unknown task '" + t + "': the tasks built so far are " + list + " (docs/evaluation.md)",
        key);
  }
}

void add_task_metrics(JsonLine& line, const TaskMetrics& m) {
  line.add("task", m.task)
      .add("num_fewshot", m.num_fewshot)
      .add("documents", m.documents)
      .add("tokens", m.tokens)
      .add("seconds", m.seconds);
  if (m.has_rolling) {
    line.add("word_perplexity", m.word_perplexity)
        .add("byte_perplexity", m.byte_perplexity)
        .add("bits_per_byte", m.bits_per_byte);
  } else {
    line.add("acc", m.acc).add("acc_stderr", m.acc_stderr);
  }
  if (m.has_acc_norm) line.add("acc_norm", m.acc_norm).add("acc_norm_stderr", m.acc_norm_stderr);
  if (m.has_perplexity) line.add("perplexity", m.perplexity);
  if (m.has_perplexity_stderr) line.add("perplexity_stderr", m.perplexity_stderr);
}

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

TaskMetrics run_choice_task(const tasks::ChoiceTask& t, Scorer& scorer, const Gpt2Tokenizer& tok,
                            const TaskOptions& o) {
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
  // Every document's requests first (the few-shot draws in document order, as the harness
  // makes them), then scored many to a forward, then each document's outcome.
  struct Doc {
    tasks::ChoiceDoc doc;
    std::vector<std::string> contexts, continuations;  // per choice, as logged
  };
  std::vector<Doc> docs;
  RequestSet requests(scorer.max_positions());
  for (int64_t i = 0; i < n; ++i) {
    Doc d{choice_doc_at(t, eval, static_cast<size_t>(i)), {}, {}};
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
    const std::string context = tasks::fewshot_prompt(examples, d.doc.question);
    for (const std::string& c : d.doc.choices) {
      // Multiple inputs (winogrande): each choice is a context before the shared target.
      d.contexts.push_back(d.doc.multiple_input ? tasks::fewshot_prompt(examples, c) : context);
      d.continuations.push_back(" " + (d.doc.multiple_input ? d.doc.target : c));
    }
    if (d.doc.multiple_input) {
      for (size_t c = 0; c < d.contexts.size(); ++c)
        requests.add(tok, d.contexts[c], {d.continuations[c]});
    } else {
      requests.add(tok, context, d.continuations);  // the choices share the context's pass
    }
    docs.push_back(std::move(d));
  }
  const std::vector<Loglikelihood> scores = requests.score(scorer, t.name, o.progress);
  std::vector<double> acc, acc_norm;
  size_t r = 0;
  for (int64_t i = 0; i < n; ++i) {
    const Doc& d = docs[static_cast<size_t>(i)];
    size_t best = 0, best_norm = 0;
    double top = 0, top_norm = 0;
    for (size_t c = 0; c < d.doc.choices.size(); ++c, ++r) {
      const Loglikelihood& s = scores[r];
      log_request(o, t.name, i, static_cast<int64_t>(c), d.contexts[c], d.continuations[c], s);
      const double ll = s.logprob;
      const double norm = ll / static_cast<double>(utf8_to_u32(d.doc.choices[c]).size());
      if (c == 0 || ll > top) {
        top = ll;
        best = c;
      }
      if (c == 0 || norm > top_norm) {
        top_norm = norm;
        best_norm = c;
      }
    }
    acc.push_back(static_cast<int64_t>(best) == d.doc.gold ? 1.0 : 0.0);
    acc_norm.push_back(static_cast<int64_t>(best_norm) == d.doc.gold ? 1.0 : 0.0);
  }
  m.documents = n;
  std::tie(m.acc, m.acc_stderr) = mean_stderr(acc);
  if (t.acc_norm) std::tie(m.acc_norm, m.acc_norm_stderr) = mean_stderr(acc_norm);
  return m;
}

}  // namespace

void RequestSet::add(const tasks::TokenPair& pair) {
  if (pair.continuation.empty()) {  // nothing to score: log-likelihood 0, greedy (the harness's)
    where_.emplace_back(SIZE_MAX, 0);
    return;
  }
  const tasks::ModelInput in = tasks::causal_input(pair, max_length_);
  // The window's rows up to the one predicting the continuation's first token are the prefix;
  // after it come the continuation's tokens but the last (causal_input's layout).
  groups_.push_back(
      {{in.tokens.begin(), in.tokens.begin() + in.first_scored + 1}, {pair.continuation}});
  where_.emplace_back(groups_.size() - 1, 0);
}

void RequestSet::add(const Gpt2Tokenizer& tok, const std::string& context,
                     const std::vector<std::string>& continuations) {
  std::vector<tasks::TokenPair> pairs;
  bool shared = true;
  for (const std::string& c : continuations) {
    pairs.push_back(tasks::encode_request(tok, context, c, tok.eod()));
    const tasks::TokenPair& p = pairs.back();
    shared = shared && !p.context.empty() && !p.continuation.empty() &&
             p.context == pairs.front().context &&
             static_cast<int64_t>(p.context.size() + p.continuation.size()) <=
                 max_length_ + 1;  // no truncation: the window is the whole request
  }
  if (!shared || pairs.size() < 2) {
    for (const tasks::TokenPair& p : pairs) add(p);
    return;
  }
  ScoreGroup g{pairs.front().context, {}};
  for (tasks::TokenPair& p : pairs) {
    where_.emplace_back(groups_.size(), g.targets.size());
    g.targets.push_back(std::move(p.continuation));
  }
  groups_.push_back(std::move(g));
}

std::vector<Loglikelihood> RequestSet::score(Scorer& scorer, const std::string& task,
                                             ProgressMode progress) const {
  Progress shown(progress, task, "request groups", static_cast<int64_t>(groups_.size()));
  const auto scores = scorer.score(groups_, [&](int64_t done) { shown.update(done); });
  shown.finish();
  std::vector<Loglikelihood> out;
  out.reserve(where_.size());
  for (const auto& [g, t] : where_) {
    if (g == SIZE_MAX) {
      out.push_back({0, true});
    } else {
      out.push_back({scores[g][t].logprob, scores[g][t].greedy});
    }
  }
  return out;
}

namespace {
TaskMetrics run_task_timed(const std::string& task, Scorer& scorer, const Gpt2Tokenizer& tok,
                           const TaskOptions& o);
}  // namespace

TaskMetrics run_task(const std::string& task, Scorer& scorer, const Gpt2Tokenizer& tok,
                     const TaskOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  const int64_t tokens = scorer.tokens_run();
  TaskMetrics m = run_task_timed(task, scorer, tok, o);
  m.tokens = scorer.tokens_run() - tokens;
  m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return m;
}

namespace {

TaskMetrics run_task_timed(const std::string& task, Scorer& scorer, const Gpt2Tokenizer& tok,
                           const TaskOptions& o) {
  check_task_names({task}, "--tasks");
  if (o.num_fewshot < 0) throw invalid_argument("--num-fewshot must be 0 or more", "--num-fewshot");
  if (const tasks::ChoiceTask* t = tasks::find_choice_task(task))
    return run_choice_task(*t, scorer, tok, o);
  if (task == "wikitext") return run_wikitext(scorer, tok, o);
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
  RequestSet requests(scorer.max_positions());
  std::vector<std::string> contexts, answers;
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
    contexts.push_back(tasks::fewshot_prompt(examples, doc.question));
    answers.push_back(doc.answer);
    requests.add(tok, contexts.back(), {doc.answer});
  }
  const std::vector<Loglikelihood> scores = requests.score(scorer, task, o.progress);
  std::vector<double> logprobs, greedy;
  for (int64_t i = 0; i < n; ++i) {
    const auto u = static_cast<size_t>(i);
    logprobs.push_back(scores[u].logprob);
    greedy.push_back(scores[u].greedy ? 1.0 : 0.0);
    log_request(o, task, i, 0, contexts[u], answers[u], scores[u]);
  }
  m.documents = n;
  std::tie(m.acc, m.acc_stderr) = mean_stderr(greedy);
  m.has_perplexity = true;
  m.perplexity = tasks::perplexity_of(logprobs);
  if (o.bootstrap_iters > 0) {
    m.has_perplexity_stderr = true;
    m.perplexity_stderr =
        tasks::bootstrap_stderr(tasks::perplexity_of, logprobs, o.bootstrap_iters);
  }
  return m;
}

}  // namespace

}  // namespace mtnlg
