// The multiple-choice tasks' documents (data/tasks/task_docs.h) against their definitions in
// lm-evaluation-harness's YAMLs and utils.py written again in Python (/usr/bin/python3; skipped
// where it is missing): str.capitalize(), HellaSwag's preprocess(), and each task's question,
// choices and gold choice on records with the cases that decide them.
#include "data/tasks/task_docs.h"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "core/status.h"
#include "tests/tasks/python_reference.h"

namespace mtnlg::tasks {
namespace {

// A Python expression of UTF-8 text: its bytes, decoded (nothing in the text ends the literal).
std::string py_text(const std::string& text) {
  static const char* hex = "0123456789abcdef";
  std::string q = "b'";
  for (const char ch : text) {
    const auto b = static_cast<unsigned char>(ch);
    q += "\\x";
    q += hex[b >> 4];
    q += hex[b & 15];
  }
  q += "'.decode()";
  return q;
}

// Python's repr-free print of a string: its UTF-8 bytes as hex, to compare exactly.
std::string hex_of(const std::string& text) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (const char ch : text) {
    const auto b = static_cast<unsigned char>(ch);
    out += hex[b >> 4];
    out += hex[b & 15];
  }
  return out;
}

TEST_CASE("str.capitalize() and HellaSwag's preprocess() are Python's") {
  const std::vector<std::string> texts = {
      "hello WORLD", "ÉCOLE Normale", "ǆungla",          "ßtraße",
      "ﬁne day",     "İSTANBUL",      "ΣΟΦΟΣ λόγος ΣΑΣ", "",
      " leading",    "123 Go",        "ŉ apostrophe"};
  const std::vector<std::string> pre = {
      "  A man [title] is seen.  ", "Text [header] with [a] brackets [not\nclosed] ok",
      "Three   spaces  here", "[step] Remove [title] x [title]", "\tTabs\t and \n newlines \n"};
  std::string program =
      "import re\n"
      "def preprocess(text):\n"
      "    text = text.strip()\n"
      "    text = text.replace(' [title]', '. ')\n"
      "    text = re.sub('\\\\[.*?\\\\]', '', text)\n"
      "    text = text.replace('  ', ' ')\n"
      "    return text\n";
  for (const std::string& t : texts)
    program += "print(" + py_text(t) + ".capitalize().encode().hex())\n";
  for (const std::string& t : pre)
    program += "print(preprocess(" + py_text(t) + ").encode().hex())\n";
  std::istringstream in(python(program));
  for (const std::string& t : texts) {
    std::string want;
    std::getline(in, want);
    INFO("capitalize '" << t << "'");
    CHECK(hex_of(python_capitalize(t)) == want);
  }
  for (const std::string& t : pre) {
    std::string want;
    std::getline(in, want);
    INFO("preprocess '" << t << "'");
    CHECK(hex_of(hellaswag_preprocess(t)) == want);
  }
}

TEST_CASE("each task's question, choices and gold are its YAML's") {
  struct Case {
    std::string task, record;
  };
  const std::vector<Case> cases = {
      {"piqa",
       R"({"goal": "How do I open a jar?", "sol1": "Twist the lid.", "sol2": "Hit it.", "label": 0})"},
      {"boolq",
       R"({"question": "is the sky blue", "passage": "The sky is blue by day.", "idx": 3, "label": 1})"},
      {"wic",
       R"({"word": "bank", "sentence1": "Café bank here.", "sentence2": "A river bank.", "start1": 5, "end1": 9, "start2": 8, "end2": 12, "label": 0})"},
      {"wic",
       R"({"word": "x", "sentence1": "ab", "sentence2": "c", "start1": -1, "end1": 10, "label": 1})"},
      {"anli_r2",
       R"({"uid": "u", "premise": "A cat sat.", "hypothesis": "An animal sat", "label": 2, "reason": ""})"},
      {"hellaswag",
       R"({"ind": 4, "activity_label": "Removing ice from car", "ctx_a": "Then, the man writes over the snow covering the window of a car, and a woman wearing winter clothes smiles.", "ctx_b": "then", "endings": [", the man adds wax to the windshield and cuts it.", ", a person board a ski lift, while two men supporting the head of the person wearing winter clothes snow as the we girls sled.", ", the man puts on a christmas coat, knitted with netting.", ", the man continues removing the snow on his car."], "source_id": "x", "split": "val", "split_type": "indomain", "label": "3"})"},
      {"winogrande",
       R"({"sentence": "Sarah was a much better surgeon than Maria so _ always got the harder cases.", "option1": "Sarah", "option2": "Maria", "answer": "1"})"},
      {"winogrande",
       R"({"sentence": "The trophy doesn't fit into the brown suitcase because the _ is too large.  ", "option1": "trophy", "option2": "suitcase", "answer": "2"})"},
      {"race",
       R"({"example_id": "h1", "article": "Tom's dog ran.\nIt was fast.", "problems": "[{'answer': 'B', 'options': ['a cat', 'a dog', 'a bird', 'a fish'], 'question': 'Tom has  _  .'}, {'answer': 'D', 'options': ['1', '2', '3', \"It's fast\"], 'question': 'What was the dog like?'}, {'answer': 'A', 'options': ['ran', 'sat', 'slept', 'ate'], 'question': 'The dog  _  .'}]"})"},
      {"race",
       R"({"example_id": "h2", "article": "One.", "problems": "[{'answer': 'C', 'options': ['x', 'y', 'z', 'w'], 'question': 'Only one?'}]"})"},
      {"hans",
       R"({"premise": "The doctor near the actor danced.", "hypothesis": "The actor danced.", "label": 1, "parse_premise": "x", "heuristic": "lexical_overlap"})"},
      {"hellaswag",
       R"({"activity_label": "Home and Garden", "ctx_a": "[header] How to grow tomatoes [title] Choose a sunny spot.", "ctx_b": "MAKE sure it drains", "endings": ["[step] Water daily.  Then wait.", "x [title] y"], "label": "0"})"},
  };
  std::string program =
      "import json, re\n"
      "def preprocess(text):\n"
      "    text = text.strip()\n"
      "    text = text.replace(' [title]', '. ')\n"
      "    text = re.sub('\\\\[.*?\\\\]', '', text)\n"
      "    text = text.replace('  ', ' ')\n"
      "    return text\n"
      "def doc(task, d):\n"
      "    if task == 'piqa': return 'Question: ' + d['goal'] + '\\nAnswer:', [d['sol1'], "
      "d['sol2']], d['label']\n"
      "    if task == 'boolq': return d['passage'] + '\\nQuestion: ' + d['question'] + "
      "'?\\nAnswer:', ['no', 'yes'], d['label']\n"
      "    if task == 'wic': return ('Sentence 1: ' + d['sentence1'] + '\\nSentence 2: ' + "
      "d['sentence2'] + \"\\nQuestion: Is the word '\" + d['sentence1'][d['start1']:d['end1']] + "
      "\"' used in the same way in the two sentences above?\\nAnswer:\"), ['no', 'yes'], "
      "d['label']\n"
      "    if task == 'anli_r2':\n"
      "        c = ['True', 'Neither', 'False']\n"
      "        return d['premise'] + '\\nQuestion: ' + d['hypothesis'] + ' True, False, or "
      "Neither?\\nAnswer:', c, c.index(c[d['label']])\n"
      "    if task == 'winogrande':\n"
      "        i = d['sentence'].index('_')\n"
      "        return '', [d['sentence'][:i] + d['option1'], d['sentence'][:i] + d['option2']], "
      "{'1': 0, '2': 1}[d['answer']], d['sentence'][i + 1:].strip()\n"
      "    if task == 'race':\n"
      "        import ast\n"
      "        probs = ast.literal_eval(d['problems'])\n"
      "        opt = lambda p: p['options'][{'A': 0, 'B': 1, 'C': 2, 'D': 3}[p['answer']]]\n"
      "        text = 'Article: ' + d['article'] + '\\n\\n'\n"
      "        for p in probs[:-1]:\n"
      "            if p['question'][-6:] == '  _  .': text += p['question'][:-5] + opt(p) + '\\n'\n"
      "            else: text += 'Question: ' + p['question'] + '\\n' + 'Answer: ' + opt(p) + "
      "'\\n'\n"
      "        text += probs[-1]['question']\n"
      "        return text, [probs[-1]['options'][i] for i in range(4)], {'A': 0, 'B': 1, 'C': 2, "
      "'D': 3}[probs[-1]['answer']]\n"
      "    if task == 'hans': return d['premise'] + '\\nQuestion: ' + d['hypothesis'] + ' True or "
      "False?\\nAnswer:', ['True', 'False'], d['label']\n"
      "    ctx = d['ctx_a'] + ' ' + d['ctx_b'].capitalize()\n"
      "    return preprocess(d['activity_label'] + ': ' + ctx), [preprocess(e) for e in "
      "d['endings']], int(d['label'])\n";
  for (const Case& c : cases)
    program +=
        "r = doc('" + c.task + "', json.loads(" + py_text(c.record) +
        "))\nq, ch, g = r[:3]\nprint(q.encode().hex(), ' '.join(x.encode().hex() for x in ch), g"
        ", *[x.encode().hex() for x in r[3:]])\n";
  std::istringstream in(python(program));
  for (const Case& c : cases) {
    std::string line;
    REQUIRE(std::getline(in, line));
    const ChoiceDoc d = choice_doc(*find_choice_task(c.task), c.record);
    std::string got = hex_of(d.question);
    got += ' ';
    for (size_t i = 0; i < d.choices.size(); ++i) {
      if (i > 0) got += ' ';
      got += hex_of(d.choices[i]);
    }
    got += ' ';
    got += std::to_string(d.gold);
    if (d.multiple_input) {
      got += ' ';
      got += hex_of(d.target);
    }
    INFO(c.task << ": " << c.record);
    CHECK(got == line);
  }
  CHECK_THROWS_WITH(
      choice_doc(*find_choice_task("piqa"), R"({"goal": "g", "sol1": "a", "label": 0})"),
      Catch::Contains("sol2"));
  CHECK_THROWS_WITH(
      choice_doc(*find_choice_task("boolq"), R"({"question": "q", "passage": "p", "label": 2})"),
      Catch::Contains("label 2"));
  CHECK_THROWS_WITH(
      choice_doc(*find_choice_task("winogrande"),
                 R"({"sentence": "no blank", "option1": "a", "option2": "b", "answer": "1"})"),
      Catch::Contains("'_'"));
  CHECK_THROWS_WITH(
      choice_doc(
          *find_choice_task("race"),
          R"({"article": "a", "problems": "[{'answer': 'E', 'options': ['1','2','3','4'], 'question': 'q'}]"})"),
      Catch::Contains("answer 'E'"));
  CHECK_THROWS_WITH(
      choice_doc(*find_choice_task("race"), R"({"article": "a", "problems": "[{'answer': 'A'"})"),
      Catch::Contains("not a Python literal"));
  CHECK(find_choice_task("race_h") == nullptr);
}

}  // namespace
}  // namespace mtnlg::tasks
