// The multiple-choice tasks of the paper's table as lm-evaluation-harness (4e7e0d47) defines
// them in its task YAMLs and utils.py: each document's question (doc_to_text), its choices
// (doc_to_choice) and the gold choice (doc_to_target), and which splits are evaluated and give
// the few-shot examples:
//   piqa        validation (few-shot: train)   "Question: {goal}\nAnswer:"  [sol1, sol2]  label
//   boolq       validation (train)  "{passage}\nQuestion: {question}?\nAnswer:"  [no, yes]
//   wic         validation (train)  "Sentence 1: {sentence1}\nSentence 2: {sentence2}\nQuestion:
//               Is the word '{sentence1[start1:end1]}' used in the same way in the two sentences
//               above?\nAnswer:"  [no, yes]  (the slice in code points)
//   anli_r2     test_r2 (train_r2)  "{premise}\nQuestion: {hypothesis} True, False, or
//               Neither?\nAnswer:"  [True, Neither, False]  label
//   hellaswag   validation (train)  utils.process_docs: query = preprocess(activity_label + ": "
//               + ctx_a + " " + ctx_b.capitalize()), choices = preprocess(each ending), gold =
//               int(label); preprocess: strip(), " [title]" -> ". ", "[...]" removed (shortest,
//               not across lines), "  " -> " " once left to right
// A choice is scored as the continuation " " + choice (the target delimiter). acc: the choice of
// the largest log-likelihood (the first on a tie); acc_norm: of the largest log-likelihood per
// character of the choice (code points).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mtnlg::tasks {

struct ChoiceDoc {
  std::string question;
  std::vector<std::string> choices;
  int64_t gold = 0;
};

struct ChoiceTask {
  std::string name, eval_split, fewshot_split;
  bool acc_norm = false;  // in the task's metric list
};

// The multiple-choice tasks built so far, and one by name (nullptr when unknown).
const std::vector<ChoiceTask>& choice_tasks();
const ChoiceTask* find_choice_task(const std::string& name);

// One record (a JSON object line) of the task's dataset as the task sees it. Throws
// invalid_argument naming the member when one is missing or of another type, or the label is
// outside the choices.
ChoiceDoc choice_doc(const ChoiceTask& task, std::string_view line);

// HellaSwag's preprocess() and Python's str.capitalize() (the first code point title-cased with
// its full mapping, the rest lower-cased), for the tests.
std::string hellaswag_preprocess(std::string_view text);
std::string python_capitalize(std::string_view text);

}  // namespace mtnlg::tasks
