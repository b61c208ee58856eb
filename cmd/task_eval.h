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

#include "data/gpt2_tokenizer.h"
#include "model/gpt_decoder.h"

namespace mtnlg {

struct TaskOptions {
  std::string task_dir;
  int64_t num_fewshot = 0;
  int64_t limit = 0;             // > 0: the first N documents (the harness's --limit)
  uint64_t fewshot_seed = 1234;  // the harness's default
  // When set: one JSON line a request (task, doc_id, request, context, continuation,
  // loglikelihood, greedy), as the harness's --log_samples keeps them (wikitext: its page
  // detokenized as the continuation, scored whole).
  std::ostream* samples = nullptr;
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
};

// The tasks run_task knows.
std::vector<std::string> known_tasks();

// Scores one task on the decoder's model (reset before each request; its length is the model's
// window). Throws invalid_argument for an unknown task (naming the known ones), not_found for a
// missing split file, and invalid_argument naming file:line for a line without its field.
TaskMetrics run_task(const std::string& task, GPTDecoder& decoder, const Gpt2Tokenizer& tok,
                     const TaskOptions& o);

// (log-likelihood, greedy) of a continuation after a context, as the harness scores a request.
struct Loglikelihood {
  double logprob = 0;
  bool greedy = false;
};
Loglikelihood score_request(GPTDecoder& decoder, const Gpt2Tokenizer& tok,
                            const std::string& context, const std::string& continuation);
// Several continuations of one context, as score_request scores each: where their requests share
// the context's tokens and fit the window whole, the context is fed once and each continuation
// from the cache after it; otherwise each is scored on its own.
std::vector<Loglikelihood> score_choices(GPTDecoder& decoder, const Gpt2Tokenizer& tok,
                                         const std::string& context,
                                         const std::vector<std::string>& continuations);

}  // namespace mtnlg
