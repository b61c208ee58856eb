#include "data/tasks/wikitext.h"

#include <algorithm>

#include "data/python_text.h"

namespace mtnlg::tasks {
namespace {

std::u32string replace_all(const std::u32string& s, std::u32string_view from,
                           std::u32string_view to) {
  std::u32string out;
  size_t at = 0;
  for (size_t hit; (hit = s.find(from, at)) != std::u32string::npos; at = hit + from.size()) {
    out.append(s, at, hit - at);
    out += to;
  }
  out.append(s, at, std::u32string::npos);
  return out;
}

// re.sub(OPEN \s*([^CLOSE]*?)\s* CLOSE, OPEN \1 CLOSE): each OPEN, left to right, through the
// first CLOSE after it, loses the whitespace just inside; an OPEN with no CLOSE after it is
// left as it is.
std::u32string tighten(const std::u32string& s, char32_t open, char32_t close) {
  std::u32string out;
  size_t i = 0;
  while (i < s.size()) {
    if (s[i] == open) {
      const size_t end = s.find(close, i + 1);
      if (end != std::u32string::npos) {
        size_t b = i + 1, e = end;
        while (b < e && python_isspace(s[b])) ++b;
        while (e > b && python_isspace(s[e - 1])) --e;
        out.push_back(open);
        out.append(s, b, e - b);
        out.push_back(close);
        i = end + 1;
        continue;
      }
    }
    out.push_back(s[i++]);
  }
  return out;
}

}  // namespace

std::string wikitext_detokenize(std::string_view page) {
  std::u32string s = utf8_to_u32(page);
  s = replace_all(s, U"s '", U"s'");
  // re.sub(r"/' [0-9]/", r"/'[0-9]/"): the replacement is those characters literally.
  std::u32string out;
  for (size_t i = 0; i < s.size();) {
    if (s.compare(i, 3, U"/' ") == 0 && i + 4 < s.size() && s[i + 3] >= U'0' && s[i + 3] <= U'9' &&
        s[i + 4] == U'/') {
      out += U"/'[0-9]/";
      i += 5;
      continue;
    }
    out.push_back(s[i++]);
  }
  s = out;
  for (const auto& [from, to] :
       {std::pair<std::u32string_view, std::u32string_view>{U" @-@ ", U"-"},
        {U" @,@ ", U","},
        {U" @.@ ", U"."},
        {U" : ", U": "},
        {U" ; ", U"; "},
        {U" . ", U". "},
        {U" ! ", U"! "},
        {U" ? ", U"? "},
        {U" , ", U", "}})
    s = replace_all(s, from, to);
  s = tighten(s, U'(', U')');
  s = tighten(s, U'[', U']');
  s = tighten(s, U'{', U'}');
  s = tighten(s, U'"', U'"');
  s = tighten(s, U'\'', U'\'');
  for (const auto& [from, to] :
       {std::pair<std::u32string_view, std::u32string_view>{U"= = = =", U"===="},
        {U"= = =", U"==="},
        {U"= =", U"=="},
        {U" \u00b0 ", U"\u00b0"},
        {U" \n", U"\n"},
        {U"\n ", U"\n"},
        {U" N ", U" 1 "},
        {U" 's", U"'s"}})
    s = replace_all(s, from, to);
  return u32_to_utf8(s);
}

int64_t wikitext_words(std::string_view page) {
  const std::u32string s = utf8_to_u32(page);
  int64_t runs = 0;
  for (size_t i = 0; i < s.size();) {
    if (!python_isspace(s[i])) {
      ++i;
      continue;
    }
    ++runs;
    while (i < s.size() && python_isspace(s[i])) ++i;
  }
  return runs + 1;  // re.split: one more piece than separators, empty ones included
}

std::vector<TokenPair> rolling_windows(const std::vector<int32_t>& tokens, int32_t prefix_token,
                                       int64_t max_length) {
  std::vector<TokenPair> out;
  const auto n = static_cast<int64_t>(tokens.size());
  if (n == 0) return out;
  const auto slice = [&](int64_t a, int64_t b) {
    return std::vector<int32_t>(tokens.begin() + a, tokens.begin() + b);
  };
  // make_disjoint_window: the context keeps len(a) - (len(b) - 1) tokens.
  const auto disjoint = [&](std::vector<int32_t> a, std::vector<int32_t> b) {
    a.resize(a.size() - (b.size() - 1));
    out.push_back({std::move(a), std::move(b)});
  };
  const int64_t pred_len = max_length;  // max_seq_len - context_len + 1, context_len 1
  const int64_t first = std::min(max_length, n);
  std::vector<int32_t> ctx = {prefix_token};
  const std::vector<int32_t> head = slice(0, first - 1);
  ctx.insert(ctx.end(), head.begin(), head.end());
  disjoint(std::move(ctx), slice(0, first));
  int64_t predicted = first;
  while (predicted < n) {
    const int64_t len = std::min(n - predicted, pred_len), end = predicted + len;
    disjoint(slice(end - max_length - 1, end - 1), slice(end - len, end));
    predicted += len;
  }
  return out;
}

}  // namespace mtnlg::tasks
