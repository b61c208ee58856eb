#include "data/tasks/task_docs.h"

#include <unicode/uchar.h>
#include <unicode/ustring.h>

#include <algorithm>

#include "core/status.h"
#include "data/json_reader.h"
#include "data/python_text.h"
#include "data/tasks/python_literal.h"

namespace mtnlg::tasks {
namespace {

// A record's members by name (the last of a repeated one, as Python's json takes it).
class Record {
 public:
  explicit Record(std::string_view line) {
    try {
      members_ = parse_json_object_members(line);
    } catch (const Error& e) {
      throw invalid_argument("not a JSON object: " + e.message(), "record");
    }
  }
  std::string str(const std::string& key) const {
    std::string out;
    const std::string_view raw = member(key);
    std::string wrapped = "{\"v\": ";
    wrapped += raw;
    wrapped += '}';
    if (parse_json_string_field(wrapped, "v", &out) != JsonFieldStatus::kFound)
      throw invalid_argument("member \"" + key + "\" is not a string", key);
    return out;
  }
  int64_t integer(const std::string& key) const {
    const std::string_view raw = member(key);
    std::string digits(raw);
    if (!digits.empty() && digits.front() == '"') digits = str(key);  // "3" (HellaSwag's labels)
    size_t used = 0;
    int64_t v = 0;
    try {
      v = std::stoll(digits, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != digits.size())
      throw invalid_argument("member \"" + key + "\" is not an integer", key);
    return v;
  }
  std::vector<std::string> strings(const std::string& key) const {
    auto v = parse_json_string_array(member(key));
    if (!v) throw invalid_argument("member \"" + key + "\" is not an array of strings", key);
    return *v;
  }

 private:
  std::string_view member(const std::string& key) const {
    const JsonMember* m = nullptr;
    for (const JsonMember& x : members_)
      if (x.key == key) m = &x;
    if (m == nullptr) throw invalid_argument("the record has no member \"" + key + "\"", key);
    return m->raw;
  }
  std::vector<JsonMember> members_;
};

std::string replace_all(std::string s, std::string_view from, std::string_view to) {
  std::string out;
  size_t at = 0;
  for (size_t hit; (hit = s.find(from, at)) != std::string::npos; at = hit + from.size()) {
    out.append(s, at, hit - at);
    out += to;
  }
  out.append(s, at, std::string::npos);
  return out;
}

std::string strip(std::string_view text) {
  const std::u32string t = utf8_to_u32(text);
  size_t b = 0, e = t.size();
  while (b < e && python_isspace(t[b])) ++b;
  while (e > b && python_isspace(t[e - 1])) --e;
  return u32_to_utf8(std::u32string_view(t).substr(b, e - b));
}

}  // namespace

const std::vector<ChoiceTask>& choice_tasks() {
  static const std::vector<ChoiceTask> tasks = {
      {"piqa", "validation", "train", true},      {"boolq", "validation", "train", false},
      {"wic", "validation", "train", false},      {"anli_r2", "test_r2", "train_r2", false},
      {"hellaswag", "validation", "train", true}, {"winogrande", "validation", "train", false},
      {"hans", "validation", "train", false},     {"race", "test", "test", false}};
  return tasks;
}

const ChoiceTask* find_choice_task(const std::string& name) {
  for (const ChoiceTask& t : choice_tasks())
    if (t.name == name) return &t;
  return nullptr;
}

std::string python_capitalize(std::string_view text) {
  const std::u32string t = utf8_to_u32(text);
  if (t.empty()) return "";
  // The first code point's full title-case mapping (ICU, as Python's _PyUnicode_ToTitleFull).
  UChar in[2], out[8];
  int32_t n = 0;
  U16_APPEND_UNSAFE(in, n, static_cast<UChar32>(t[0]));
  UErrorCode err = U_ZERO_ERROR;
  const int32_t len = u_strToTitle(out, 8, in, n, nullptr, nullptr, &err);
  std::u32string head;
  if (U_FAILURE(err)) {
    head.push_back(static_cast<char32_t>(u_totitle(static_cast<UChar32>(t[0]))));
  } else {
    for (int32_t i = 0; i < len;) {
      UChar32 c;
      U16_NEXT(out, i, len, c);
      head.push_back(static_cast<char32_t>(c));
    }
  }
  // The rest lower-cased with Python's full mapping, Final_Sigma seeing the whole string (as
  // CPython's lower_ucs4 does): the whole string's lowering past its first code point's, whose
  // own lowering ('İ': two code points) has the same length alone.
  const std::u32string rest = python_lower(t).substr(python_lower(t.substr(0, 1)).size());
  return u32_to_utf8(head + rest);
}

std::string hellaswag_preprocess(std::string_view text) {
  std::string s = strip(text);
  s = replace_all(s, " [title]", ". ");
  // re.sub("\\[.*?\\]", "", s): the shortest bracket span not crossing a newline, left to right.
  std::string out;
  for (size_t i = 0; i < s.size();) {
    if (s[i] == '[') {
      size_t j = i + 1;
      while (j < s.size() && s[j] != ']' && s[j] != '\n') ++j;
      if (j < s.size() && s[j] == ']') {
        i = j + 1;
        continue;
      }
    }
    out.push_back(s[i++]);
  }
  return replace_all(out, "  ", " ");
}

ChoiceDoc choice_doc(const ChoiceTask& task, std::string_view line) {
  const Record r(line);
  ChoiceDoc d;
  const std::string& t = task.name;
  if (t == "piqa") {
    d.question = "Question: " + r.str("goal") + "\nAnswer:";
    d.choices = {r.str("sol1"), r.str("sol2")};
    d.gold = r.integer("label");
  } else if (t == "boolq") {
    d.question = r.str("passage") + "\nQuestion: " + r.str("question") + "?\nAnswer:";
    d.choices = {"no", "yes"};
    d.gold = r.integer("label");
  } else if (t == "wic") {
    const std::u32string s1 = utf8_to_u32(r.str("sentence1"));
    const int64_t n = static_cast<int64_t>(s1.size());
    // Python's slice: negative indices count from the end, bounds clamp.
    const auto clamp = [&](int64_t i) { return std::clamp(i < 0 ? i + n : i, int64_t{0}, n); };
    const int64_t a = clamp(r.integer("start1")), b = clamp(r.integer("end1"));
    const std::string word = b > a ? u32_to_utf8(std::u32string_view(s1).substr(
                                         static_cast<size_t>(a), static_cast<size_t>(b - a)))
                                   : std::string();
    d.question = "Sentence 1: " + r.str("sentence1") + "\nSentence 2: " + r.str("sentence2") +
                 "\nQuestion: Is the word '" + word +
                 "' used in the same way in the two sentences above?\nAnswer:";
    d.choices = {"no", "yes"};
    d.gold = r.integer("label");
  } else if (t == "anli_r2") {
    d.question = r.str("premise") + "\nQuestion: " + r.str("hypothesis") +
                 " True, False, or Neither?\nAnswer:";
    d.choices = {"True", "Neither", "False"};
    d.gold = r.integer("label");
  } else if (t == "hellaswag") {
    const std::string ctx = r.str("ctx_a") + " " + python_capitalize(r.str("ctx_b"));
    d.question = hellaswag_preprocess(r.str("activity_label") + ": " + ctx);
    for (const std::string& e : r.strings("endings")) d.choices.push_back(hellaswag_preprocess(e));
    d.gold = r.integer("label");
  } else if (t == "winogrande") {
    const std::string sentence = r.str("sentence");
    const size_t i = sentence.find('_');
    if (i == std::string::npos)
      throw invalid_argument("the sentence has no '_' to fill", "sentence");
    d.multiple_input = true;
    d.choices = {sentence.substr(0, i) + r.str("option1"),
                 sentence.substr(0, i) + r.str("option2")};
    d.target = strip(std::string_view(sentence).substr(i + 1));
    const std::string answer = r.str("answer");
    if (answer != "1" && answer != "2")
      throw invalid_argument("answer \"" + answer + "\" is not \"1\" or \"2\"", "answer");
    d.gold = answer == "1" ? 0 : 1;
  } else if (t == "race") {
    PyValue problems;
    try {
      problems = parse_python_literal(r.str("problems"));
    } catch (const Error& e) {
      throw invalid_argument(e.message(), "problems");
    }
    if (problems.kind != PyValue::Kind::kList || problems.items.empty())
      throw invalid_argument("not a non-empty list of problems", "problems");
    const auto option = [](const PyValue& problem) {
      const std::string letter = problem.at("answer").str;
      const PyValue& options = problem.at("options");
      const size_t k = letter == "A"   ? 0
                       : letter == "B" ? 1
                       : letter == "C" ? 2
                       : letter == "D" ? 3
                                       : 4;
      if (k > 3 || options.items.size() <= k)
        throw invalid_argument("answer '" + letter + "' is not one of the options A-D", "problems");
      return k;
    };
    std::string text = "Article: " + r.str("article") + "\n\n";
    for (size_t p = 0; p + 1 < problems.items.size(); ++p) {
      const PyValue& problem = problems.items[p];
      const std::u32string q = utf8_to_u32(problem.at("question").str);
      const std::string answer = problem.at("options").items[option(problem)].str;
      if (q.size() >= 6 && q.substr(q.size() - 6) == U"  _  .") {
        text += u32_to_utf8(std::u32string_view(q).substr(0, q.size() - 5)) + answer + "\n";
      } else {
        text += "Question: " + u32_to_utf8(q) + "\n" + "Answer: " + answer + "\n";
      }
    }
    const PyValue& last = problems.items.back();
    text += last.at("question").str;
    d.question = std::move(text);
    const PyValue& options = last.at("options");
    if (options.items.size() < 4)
      throw invalid_argument("the last problem has fewer than 4 options", "problems");
    for (size_t k = 0; k < 4; ++k) d.choices.push_back(options.items[k].str);
    d.gold = static_cast<int64_t>(option(last));
  } else if (t == "hans") {
    d.question =
        r.str("premise") + "\nQuestion: " + r.str("hypothesis") + " True or False?\nAnswer:";
    d.choices = {"True", "False"};
    d.gold = r.integer("label");
  } else {
    throw invalid_argument("unknown multiple-choice task '" + t + "'", "--tasks");
  }
  if (d.gold < 0 || d.gold >= static_cast<int64_t>(d.choices.size()))
    throw invalid_argument("label " + std::to_string(d.gold) + " is not one of the " +
                               std::to_string(d.choices.size()) + " choices",
                           "label");
  return d;
}

}  // namespace mtnlg::tasks
