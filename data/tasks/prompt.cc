#include "data/tasks/prompt.h"

namespace mtnlg::tasks {

std::string fewshot_prompt(const std::vector<QaPair>& examples, std::string_view question,
                           std::string_view target_delimiter, std::string_view fewshot_delimiter) {
  std::string out;
  for (const QaPair& e : examples) {
    out += e.question;
    out += target_delimiter;
    out += e.answer;
    out += fewshot_delimiter;
  }
  out += question;
  return out;
}

QaPair lambada_pair(std::string_view text) {
  const size_t last = text.rfind(' ');
  QaPair p;
  if (last == std::string_view::npos) {  // one word: ' '.join([]) is ""
    p.answer.reserve(text.size() + 1);
    p.answer += ' ';
    p.answer += text;
    return p;
  }
  p.question = std::string(text.substr(0, last));
  p.answer += ' ';
  p.answer += text.substr(last + 1);
  return p;
}

}  // namespace mtnlg::tasks
