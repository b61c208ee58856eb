// filter_ngrams.py's pieces (data/curate/ngram_filter.h), on cases worked out by hand from the
// script; tests/curate/decontaminate_test.sh compares whole shards with a Python transcription.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "data/curate/ngram_filter.h"

using namespace mtnlg::curate;
using mtnlg::python_lower;
using mtnlg::u32_to_utf8;
using mtnlg::utf8_to_u32;

namespace {

std::string words(int from, int n) {
  std::string s;
  for (int i = from; i < from + n; ++i) s += (s.empty() ? "w" : " w") + std::to_string(i);
  return s;
}

}  // namespace

TEST_CASE("words are re's word-character runs of the lower-cased text - positions in the lowered text") {
  std::vector<std::u32string_view> w;
  std::vector<int64_t> pos;
  // 'İ' lower-cases to 'i' + U+0307 (a combining mark, not \w): one more code point.
  const std::u32string lowered = python_lower(utf8_to_u32("Héllo, wörld_1 \xc4\xb0x 2Ⅻ"));
  python_words(lowered, &w, &pos);
  REQUIRE(w.size() == 5);
  CHECK(u32_to_utf8(std::u32string(w[0])) == "h\xc3\xa9llo");
  CHECK(u32_to_utf8(std::u32string(w[1])) == "w\xc3\xb6rld_1");
  CHECK(u32_to_utf8(std::u32string(w[2])) == "i");
  CHECK(u32_to_utf8(std::u32string(w[3])) == "x");
  CHECK(u32_to_utf8(std::u32string(w[4])) == "2\xe2\x85\xbb");  // Ⅻ has a numeric value: \w
  CHECK(pos == std::vector<int64_t>{0, 7, 15, 17, 19});
}

TEST_CASE("task n-grams: 13-word windows, a text of 8 to 12 words whole, shorter ones nothing") {
  TaskNgrams g({});
  g.add_task_text(words(0, 15));  // 3 windows
  g.add_task_text(words(100, 9));  // whole
  g.add_task_text(words(200, 7));  // nothing
  g.add_task_text(words(0, 13));  // the first window again: no new n-gram
  REQUIRE(g.size() == 4);
  CHECK(g.key(0) == words(0, 13));
  CHECK(g.key(3) == words(100, 9));
}

TEST_CASE("a hit cuts at sentence ends 200 characters away - short pieces dropped") {
  TaskNgrams g({});
  g.add_task_text(words(0, 13));
  // 50 sentences of 5 words ("aa bb cc dd ee." is 15 characters, 16 with the space).
  std::string before, after;
  for (int i = 0; i < 50; ++i) before += "aa bb cc dd ee. ";
  after = before;
  const std::string text = before + words(0, 13) + " " + after;
  // Pass 1: one hit in this document.
  CHECK(g.hits(text) == std::vector<int64_t>{0});
  g.count(g.hits(text));
  g.keep_below_threshold();  // 1 document < 10: removed in pass 2
  const std::vector<std::string> pieces = g.clean(text);
  REQUIRE(pieces.size() == 2);
  // Before: the hit starts at 800; from 600 back to a '.': the one at 590 (600 falls in the
  // sentence that starts at 592), so text[0:591].
  CHECK(pieces[0] == before.substr(0, 591));
  // After: from 800 + the key's length ("w0 w1 ... w12": 38) + 200 forward to the next '.', then
  // everything after it.
  const std::string key = words(0, 13);
  const size_t from = text.find('.', 800 + key.size() + 200);
  CHECK(pieces[1] == text.substr(from + 1));
  // A document of fewer than 13 words is never scanned, even if all of it is task text.
  TaskNgrams short_task({});
  short_task.add_task_text(words(0, 9));
  CHECK(short_task.clean(words(0, 9)) == std::vector<std::string>{words(0, 9)});
  CHECK(short_task.hits(words(0, 9)).empty());
}
