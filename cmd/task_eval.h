// mtnlg-eval --tasks: lm-evaluation-harness's tasks scored by a model, as the harness computes
// them for a Hugging Face causal model (data/tasks/ builds the prompts, few-shot examples and
// requests; here the model scores them): the log-likelihood tasks lambada_openai and
// lambada_standard (acc: every continuation token the greedy one; perplexity: exp of minus the
// mean log-likelihood) and the multiple-choice tasks of data/tasks/task_docs.h (piqa, boolq,
// wic, anli_r2, hellaswag, winogrande with its partial scoring, hans, race: acc, and acc_norm
// where the task lists it) and wikitext (the pages' rolling windows: word_perplexity,
// byte_perplexity, bits_per_byte) (docs/evaluation.md).
//
// Task files: TASK_DIR/TASK/SPLIT.jsonl, one document a line, the harness's dataset fields
// (lambada: "text"). LAMBADA's evaluated split is test; its few-shot examples come from the
// first split the harness would take them from (lambada_standard: validation; lambada_openai:
// test, the evaluated document removed). The multiple-choice tasks' splits are their YAMLs'.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "core/metrics.h"
#include "core/progress.h"
#include "data/gpt2_tokenizer.h"
#include "data/tasks/requests.h"
#include "model/scorer.h"

namespace mtnlg {

struct TaskOptions {
  std::string task_dir;
  int64_t num_fewshot = 0;
  int64_t limit = 0;             // > 0: the first N documents (the harness's --limit)
  uint64_t fewshot_seed = 1234;  // the harness's default
  // Requests packed into one forward: up to this many model windows' worth of tokens (the
  // harness's --batch-size counts padded windows; the scores do not depend on it).
  int64_t batch_size = 8;
  // The harness's --bootstrap_iters: resamples for perplexity's standard error (0: none, "N/A").
  int64_t bootstrap_iters = 100000;
  // When set: one JSON line a request (task, doc_id, request, context, continuation,
  // loglikelihood, greedy), as the harness's --log_samples keeps them (wikitext: its page
  // detokenized as the continuation, scored whole).
  std::ostream* samples = nullptr;
  // How scoring shows its progress (core/progress.h): mtnlg-eval's reporting rank draws a bar
  // on a terminal; the trainer's eval.tasks_interval logs lines.
  ProgressMode progress = ProgressMode::kLines;
};

struct TaskMetrics {
  std::string task;
  int64_t documents = 0;  // scored
  int64_t available = 0;  // in the split
  int64_t num_fewshot = 0;
  double acc = 0, acc_stderr = 0;  // mean and the harness's mean_stderr (n - 1)
  bool has_acc_norm = false, has_perplexity = false, has_rolling = false;
  // wikitext: the log-likelihood over the words and the bytes of the original pages.
  double word_perplexity = 0, byte_perplexity = 0, bits_per_byte = 0;
  double acc_norm = 0, acc_norm_stderr = 0;
  double perplexity = 0;
  bool has_perplexity_stderr = false;  // bootstrapped (TaskOptions::bootstrap_iters > 0)
  double perplexity_stderr = 0;
  int64_t tokens = 0;  // tokens the model ran (contexts shared by choices counted once)
  double seconds = 0;  // the task's wall time, its files read included
};

// A task's fields on a JSON line (mtnlg-eval's stdout, the trainer's metrics file): task,
// num_fewshot, documents, tokens, seconds, then the task's metrics (acc, acc_stderr, acc_norm,
// acc_norm_stderr, perplexity; wikitext: word_perplexity, byte_perplexity, bits_per_byte).
void add_task_metrics(JsonLine& line, const TaskMetrics& m);

// The tasks run_task knows.
std::vector<std::string> known_tasks();
// Throws invalid_argument naming `key` and the known tasks for a name run_task does not know.
void check_task_names(const std::vector<std::string>& names, const std::string& key);

// Scores one task on the scorer's model (its window: the model's positions). Throws
// invalid_argument for an unknown task (naming the known ones), not_found for a missing split
// file, and invalid_argument naming file:line for a line without its field.
TaskMetrics run_task(const std::string& task, Scorer& scorer, const Gpt2Tokenizer& tok,
                     const TaskOptions& o);

// (log-likelihood, greedy) of a continuation after a context, as the harness scores a request.
struct Loglikelihood {
  double logprob = 0;
  bool greedy = false;
};

// A task's log-likelihood requests, gathered to be scored many to a forward (model/scorer.h). The
// continuations of one context share its tokens as the scorer's prefix where their requests
// all keep the context whole and the window holds each whole; otherwise each request is its
// window (tasks::causal_input) alone. Either way each scores as the harness scores it alone.
class RequestSet {
 public:
  explicit RequestSet(int64_t max_length) : max_length_(max_length) {}

  // The requests (context, continuation) for each continuation, numbered in order from size().
  void add(const Gpt2Tokenizer& tok, const std::string& context,
           const std::vector<std::string>& continuations);
  // One request already tokenized (wikitext's rolling windows).
  void add(const tasks::TokenPair& pair);

  int64_t size() const { return static_cast<int64_t>(where_.size()); }
  // Every request's score, in order; its progress (a bar or lines) names `task`.
  std::vector<Loglikelihood> score(Scorer& scorer, const std::string& task,
                                   ProgressMode progress = ProgressMode::kLines) const;

 private:
  int64_t max_length_;
  std::vector<ScoreGroup> groups_;
  std::vector<std::pair<size_t, size_t>> where_;  // per request: its group and target
};

}  // namespace mtnlg
