// lm-evaluation-harness's plain-text prompt (no chat template; build_qa_turn and
// Message.to_text at 4e7e0d47): each few-shot example is its question, the target delimiter
// (" "), its answer and the few-shot delimiter ("\n\n"); then the evaluated document's question
// with no delimiter (a log-likelihood request's continuation carries its own). Tasks with a
// description are not built yet.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace mtnlg::tasks {

struct QaPair {
  std::string question, answer;  // doc_to_text, doc_to_target
};

std::string fewshot_prompt(const std::vector<QaPair>& examples, std::string_view question,
                           std::string_view target_delimiter = " ",
                           std::string_view fewshot_delimiter = "\n\n");

// LAMBADA as the harness's lambada_openai and lambada_standard (version 1.0) take a text:
// question = its words but the last joined by ' ', answer = ' ' + the last, where words are
// Python's text.split(' ') (every single space splits; empty words are kept).
QaPair lambada_pair(std::string_view text);

}  // namespace mtnlg::tasks
