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
//   winogrande validation (train)  partial scoring, the harness's multiple inputs: the contexts
//               vary by option, sentence[:i] + option1|option2 (i: the first '_'), the shared
//               continuation is sentence[i + 1:].strip(); gold: answer "1" or "2"
//   race        test (test, the document removed: RACE has no other split here)  its
//               preprocess_race.py (version 3.0): "problems" is a Python literal (ast.literal_eval)
//               of the article's questions; the text is "Article: {article}\n\n", then each earlier
//               problem answered (a cloze "... _ ." filled in, else "Question: ...\nAnswer:
//               ...\n"), then the last problem's question; its 4 options; gold by its answer letter
//   hans        validation (train)  defined here in the harness's style (it has no HANS task):
//               "{premise}\nQuestion: {hypothesis} True or False?\nAnswer:"  [True, False],
//               label 0 (entailment) True, 1 (non-entailment) False
// A choice is scored as the continuation " " + choice (the target delimiter); with multiple
// inputs each context is scored with the continuation " " + the shared target. acc: the choice of
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
  // Multiple inputs (WinoGrande): the contexts are the choices and `target` is every one's
  // continuation; question is empty.
  bool multiple_input = false;
  std::string target;
  // A few-shot example of this document: question (or the gold context) and the answer.
  std::string example_question() const {
    return multiple_input ? choices[static_cast<size_t>(gold)] : question;
  }
  std::string example_answer() const {
    return multiple_input ? target : choices[static_cast<size_t>(gold)];
  }
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
