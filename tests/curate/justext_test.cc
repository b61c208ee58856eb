// jusText's stop-word lists (data/curate/justext.h): the compiled-in English list is jusText's
// stoplists/English.txt read as its get_stoplist reads it (a word a line, lower-cased), and a
// list from a file is read the same way.
#include <catch2/catch.hpp>
#include <fstream>
#include <iterator>
#include <string>

#include "data/curate/justext.h"

using namespace mtnlg::curate;

TEST_CASE("the compiled-in English list is jusText's English.txt, lower-cased") {
  const auto& words = english_stoplist();
  std::ifstream in(std::string(MTNLG_SOURCE_DIR) + "/data/curate/stoplists/English.txt");
  REQUIRE(in);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(words == parse_stoplist(text));
  // 503 lines; 50 differ only by case ("The"/"the"), so 453 distinct words.
  CHECK(words.size() == 453);
  for (const char* w : {"the", "of", "however,", "u.s.", "(born", "\"the", "church"})
    CHECK(words.count(w) == 1);
  CHECK(words.count("The") == 0);
}

TEST_CASE("a stop-word list: a word a line, CRLF and trailing spaces dropped, lower-cased") {
  const auto words = parse_stoplist("The\r\nÉTÉ  \n\nof\n");
  CHECK(words == std::unordered_set<std::string>{"the", "été", "of"});
  CHECK(parse_stoplist("").empty());
}
