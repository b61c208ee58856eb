// WikiText's pieces (data/tasks/wikitext.h) against lm-evaluation-harness's Python written
// again here: the detokenizer on generated pages of WikiText's tokens (" @-@ ", spaced
// punctuation and brackets, quotes, headings, Unicode spaces), the word count of
// re.split(r"\s+"), and the rolling windows for token lists around the window length.
#include "data/tasks/wikitext.h"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "tests/tasks/python_reference.h"

namespace mtnlg::tasks {
namespace {

TEST_CASE("the WikiText detokenizer and word count are the harness's") {
  const std::string program = R"PY(
import random, re
def wikitext_detokenizer(string):
    string = string.replace("s '", "s'")
    string = re.sub(r"/' [0-9]/", r"/'[0-9]/", string)
    string = string.replace(" @-@ ", "-")
    string = string.replace(" @,@ ", ",")
    string = string.replace(" @.@ ", ".")
    string = string.replace(" : ", ": ")
    string = string.replace(" ; ", "; ")
    string = string.replace(" . ", ". ")
    string = string.replace(" ! ", "! ")
    string = string.replace(" ? ", "? ")
    string = string.replace(" , ", ", ")
    string = re.sub(r"\(\s*([^\)]*?)\s*\)", r"(\1)", string)
    string = re.sub(r"\[\s*([^\]]*?)\s*\]", r"[\1]", string)
    string = re.sub(r"{\s*([^}]*?)\s*}", r"{\1}", string)
    string = re.sub(r"\"\s*([^\"]*?)\s*\"", r'"\1"', string)
    string = re.sub(r"'\s*([^']*?)\s*'", r"'\1'", string)
    string = string.replace("= = = =", "====")
    string = string.replace("= = =", "===")
    string = string.replace("= =", "==")
    string = string.replace(" " + chr(176) + " ", chr(176))
    string = string.replace(" \n", "\n")
    string = string.replace("\n ", "\n")
    string = string.replace(" N ", " 1 ")
    string = string.replace(" 's", "'s")
    return string
rnd = random.Random(3)
pieces = ["the", "cat", "s", "'", "'s", "@-@", "@,@", "@.@", "1", "2", "N", ":", ";", ".", "!",
          "?", ",", "(", ")", "[", "]", "{", "}", '"', "=", "\n", chr(176), "/'", "/", "é",
          "\u00a0", "\u3000", "\t", "  "]
for _ in range(400):
    page = " ".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 40)))
    if rnd.random() < 0.3: page = " " + page
    if rnd.random() < 0.3: page += " \n "
    out = wikitext_detokenizer(page)
    print(page.encode().hex(), out.encode().hex(), len(re.split(r"\s+", page)))
)PY";
  std::istringstream in(python(program));
  const auto unhex = [](const std::string& h) {
    std::string out;
    for (size_t i = 0; i + 1 < h.size(); i += 2)
      out.push_back(static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16)));
    return out;
  };
  int n = 0;
  for (std::string line; std::getline(in, line); ++n) {
    // An empty page prints as an empty first field: read by position.
    const size_t a = line.find(' '), b = line.find(' ', a + 1);
    const std::string page_hex = line.substr(0, a), want_hex = line.substr(a + 1, b - a - 1);
    const int64_t words = std::stoll(line.substr(b + 1));
    const std::string page = unhex(page_hex);
    INFO("page: " << page);
    CHECK(wikitext_detokenize(page) == unhex(want_hex));
    CHECK(wikitext_words(page) == words);
  }
  CHECK(n == 400);
}

TEST_CASE("rolling windows are the harness's get_rolling_token_windows, made disjoint") {
  std::string program =
      "def get_rolling_token_windows(token_list, prefix_token, max_seq_len, context_len):\n"
      "    if not token_list: return\n"
      "    pred_len = max_seq_len - context_len + 1\n"
      "    predicted = 0\n"
      "    first_seq_len = min(max_seq_len, len(token_list))\n"
      "    yield [prefix_token] + token_list[: first_seq_len - 1], token_list[:first_seq_len]\n"
      "    predicted += first_seq_len\n"
      "    while predicted < len(token_list):\n"
      "        window_pred_len = min(len(token_list) - predicted, pred_len)\n"
      "        window_end = predicted + window_pred_len\n"
      "        yield (token_list[window_end - max_seq_len - 1 : window_end - 1],\n"
      "               token_list[window_end - window_pred_len : window_end])\n"
      "        predicted += window_pred_len\n"
      "def make_disjoint_window(pair):\n"
      "    a, b = pair\n"
      "    return a[: len(a) - (len(b) - 1)], b\n"
      "for n in [0, 1, 2, 7, 8, 9, 16, 17, 26, 31]:\n"
      "    w = list(map(make_disjoint_window, get_rolling_token_windows(list(range(100, 100 + n)), "
      "7, 8, 1)))\n"
      "    print(n, '|'.join(','.join(map(str, a)) + ';' + ','.join(map(str, b)) for a, b in w))\n";
  std::istringstream in(python(program));
  for (const int64_t n : {0, 1, 2, 7, 8, 9, 16, 17, 26, 31}) {
    std::string line;
    REQUIRE(std::getline(in, line));
    std::vector<int32_t> tokens;
    for (int64_t i = 0; i < n; ++i) tokens.push_back(static_cast<int32_t>(100 + i));
    std::string got = std::to_string(n);
    got += ' ';
    const auto list = [&](const std::vector<int32_t>& ids) {
      for (size_t i = 0; i < ids.size(); ++i) {
        if (i > 0) got += ',';
        got += std::to_string(ids[i]);
      }
    };
    bool first = true;
    for (const TokenPair& w : rolling_windows(tokens, 7, 8)) {
      if (!first) got += '|';
      first = false;
      list(w.context);
      got += ';';
      list(w.continuation);
    }
    INFO(n << " tokens");
    CHECK(got == line);
  }
}

}  // namespace
}  // namespace mtnlg::tasks
