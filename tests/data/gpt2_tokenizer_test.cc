#include "data/gpt2_tokenizer.h"

#include <catch2/catch.hpp>

#include <fstream>
#include <thread>

#include "core/status.h"
#include "data/json_reader.h"
#include "data/unicode_classes.h"
#include "test_util.h"

namespace mtnlg {
namespace {

std::shared_ptr<const Gpt2Tokenizer> gpt2() {
  return Gpt2Tokenizer::load(test::source_path("data/gpt2/encoder.json"),
                             test::source_path("data/gpt2/vocab.bpe"));
}

struct Case {
  std::string name;
  std::string bytes;  // the text, or the raw bytes of a "hex" case
  bool valid_utf8 = true;
  std::vector<int32_t> ids;
};

std::vector<int32_t> parse_ids(const std::string& line) {
  const size_t open = line.find("\"ids\":[");
  REQUIRE(open != std::string::npos);
  std::vector<int32_t> ids;
  size_t pos = open + 7;
  while (line[pos] != ']') {
    size_t used = 0;
    ids.push_back(std::stoi(line.substr(pos), &used));
    pos += used;
    if (line[pos] == ',') ++pos;
  }
  return ids;
}

// tests/data/fixtures/gpt2_tokenizer_cases.jsonl (made by tests/data/make_tokenizer_fixtures.js
// with gpt-3-encoder and checked against GPT-2's Python encoder).
std::vector<Case> load_cases() {
  std::ifstream in(test::source_path("tests/data/fixtures/gpt2_tokenizer_cases.jsonl"));
  REQUIRE(in);
  std::vector<Case> cases;
  std::string line, hex;
  while (std::getline(in, line)) {
    Case c;
    REQUIRE(parse_json_string_field(line, "name", &c.name) == JsonFieldStatus::kFound);
    if (parse_json_string_field(line, "hex", &hex) == JsonFieldStatus::kFound) {
      c.valid_utf8 = false;
      for (size_t i = 0; i + 1 < hex.size(); i += 2) {
        c.bytes.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
      }
    } else {
      REQUIRE(parse_json_string_field(line, "text", &c.bytes) == JsonFieldStatus::kFound);
    }
    c.ids = parse_ids(line);
    cases.push_back(std::move(c));
  }
  REQUIRE(cases.size() > 50);
  return cases;
}

TEST_CASE("gpt2 tokenizer matches every fixture case", "[gpt2_tokenizer]") {
  const auto tok = gpt2();
  Gpt2Tokenizer::Cache cache;  // shared across cases: cached pieces must give the same ids
  for (const Case& c : load_cases()) {
    INFO("case " << c.name);
    CHECK(tok->encode(c.bytes) == c.ids);
    std::vector<int32_t> cached;
    tok->encode(c.bytes, cache, &cached);
    CHECK(cached == c.ids);
    if (c.valid_utf8) {
      CHECK(is_valid_utf8(c.bytes));
      CHECK(tok->decode(c.ids) == c.bytes);
    } else {
      // The documented rule: decode as Python's errors="replace", then encode.
      CHECK_FALSE(is_valid_utf8(c.bytes));
      CHECK(tok->decode(c.ids) == replace_invalid_utf8(c.bytes));
      CHECK(tok->encode(replace_invalid_utf8(c.bytes)) == c.ids);
    }
  }
}

TEST_CASE("gpt2 tokenizer knows GPT-2's well-known ids and the end of document",
          "[gpt2_tokenizer]") {
  const auto tok = gpt2();
  CHECK(tok->vocab_size() == 50257);
  CHECK(tok->eod() == 50256);
  CHECK(tok->decode(std::vector<int32_t>{50256}) == "<|endoftext|>");
  CHECK(tok->encode("Hello world") == std::vector<int32_t>{15496, 995});
  CHECK(tok->encode(" the") == std::vector<int32_t>{262});
  CHECK(tok->encode("") == std::vector<int32_t>{});
  // The special token is plain text to the encoder, as in GPT-2.
  const auto eot_text = tok->encode("<|endoftext|>");
  CHECK(eot_text.size() > 1);
  CHECK(std::find(eot_text.begin(), eot_text.end(), 50256) == eot_text.end());
  CHECK_THROWS_AS(tok->decode(std::vector<int32_t>{50257}), Error);
  CHECK_THROWS_AS(tok->decode(std::vector<int32_t>{-1}), Error);
}

TEST_CASE("gpt2 tokenizer round-trips long and hostile inputs", "[gpt2_tokenizer]") {
  const auto tok = gpt2();
  // One 200k-letter piece: BPE must not be quadratic, and must merge it back exactly.
  const std::string word(200000, 'a');
  const auto ids = tok->encode(word);
  CHECK(ids.size() <= word.size() / 4);  // "aaaa" is one token
  CHECK(tok->decode(ids) == word);
  // Every byte value, alone and in runs: invalid UTF-8 is replaced, never a crash.
  std::string all;
  for (int b = 0; b < 256; ++b) all += std::string(3, static_cast<char>(b));
  CHECK(tok->decode(tok->encode(all)) == replace_invalid_utf8(all));
  CHECK(tok->decode(tok->encode(std::string(5000, '\n'))) == std::string(5000, '\n'));
}

TEST_CASE("gpt2 tokenizer gives the same ids from many threads", "[gpt2_tokenizer]") {
  const auto tok = gpt2();
  const auto cases = load_cases();
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      Gpt2Tokenizer::Cache cache;
      for (int rep = 0; rep < 3; ++rep) {
        for (const Case& c : cases) {
          std::vector<int32_t> ids;
          tok->encode(c.bytes, cache, &ids);
          if (ids != c.ids) ++mismatches[t];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(mismatches == std::vector<int>(4, 0));
}

TEST_CASE("utf8 decoding replaces each maximal ill-formed subpart", "[gpt2_tokenizer]") {
  const std::string r = "\xEF\xBF\xBD";
  CHECK(replace_invalid_utf8("a\xE2\x82"
                             "b") == "a" + r + "b");                 // truncated: one
  CHECK(replace_invalid_utf8("\xED\xA0\x80") == r + r + r);          // surrogate: three
  CHECK(replace_invalid_utf8("\xC0\xAF") == r + r);                  // overlong
  CHECK(replace_invalid_utf8("\xF0\x9F\x98") == r);                  // truncated 4-byte
  CHECK(replace_invalid_utf8("\xF4\x90\x80\x80") == r + r + r + r);  // above U+10FFFF
  CHECK(replace_invalid_utf8("\xFF\x80x") == r + r + "x");
  CHECK(is_valid_utf8("caf\xC3\xA9 \xF0\x9F\x98\x80 " + r));
  CHECK_FALSE(is_valid_utf8("\xC3"));
  CHECK_FALSE(is_valid_utf8("\xEF\xBF"));
}

TEST_CASE("character classes are Python regex's letter - number and space classes",
          "[gpt2_tokenizer]") {
  CHECK(char_class(U'a') == CharClass::kLetter);
  CHECK(char_class(U'\u00e9') == CharClass::kLetter);
  CHECK(char_class(U'\u65e5') == CharClass::kLetter);      // 日
  CHECK(char_class(U'\U0001E030') == CharClass::kLetter);  // new in Unicode 15.0
  CHECK(char_class(U'7') == CharClass::kNumber);
  CHECK(char_class(U'\u0663') == CharClass::kNumber);  // ٣
  CHECK(char_class(U'\u00b2') == CharClass::kNumber);  // ²
  CHECK(char_class(U'\u2167') == CharClass::kNumber);  // Ⅷ
  CHECK(char_class(U'\u0085') == CharClass::kSpace);   // NEL: White_Space
  CHECK(char_class(U'\u00a0') == CharClass::kSpace);
  CHECK(char_class(U'\u3000') == CharClass::kSpace);
  CHECK(char_class(U'\u2028') == CharClass::kSpace);
  CHECK(char_class(U'\u001c') == CharClass::kOther);  // str.isspace(), but not \s
  CHECK(char_class(U'\ufeff') == CharClass::kOther);  // JavaScript's \s, not Python's
  CHECK(char_class(U'\u180e') == CharClass::kOther);
  CHECK(char_class(U'\u200b') == CharClass::kOther);
  CHECK(char_class(U'\u0301') == CharClass::kOther);  // combining mark
  CHECK(char_class(U'\ufffd') == CharClass::kOther);
}

TEST_CASE("gpt2 tokenizer rejects missing and malformed vocabulary files", "[gpt2_tokenizer]") {
  test::TempDir dir;
  const std::string vocab = test::source_path("data/gpt2/encoder.json");
  const std::string merges = test::source_path("data/gpt2/vocab.bpe");
  try {
    Gpt2Tokenizer::load(dir.file("nope.json"), merges);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.code() == Code::kNotFound);
    CHECK_THAT(e.what(), Catch::Contains("nope.json"));
  }
  test::write_file(dir.file("bad.json"), "{\"a\": 1,}");
  CHECK_THROWS_AS(Gpt2Tokenizer::load(dir.file("bad.json"), merges), Error);
  test::write_file(dir.file("bad.bpe"), "#version: 0.2\n\xC4\xA0 t\nzzzzzq qqqqz\n");
  try {
    Gpt2Tokenizer::load(vocab, dir.file("bad.bpe"));
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.code() == Code::kCorruption);
    CHECK_THAT(e.what(), Catch::Contains("bad.bpe:3"));
  }
}

}  // namespace
}  // namespace mtnlg
