#include "data/json_reader.h"

#include <catch2/catch.hpp>

#include "core/status.h"

namespace mtnlg {
namespace {

std::string field(const std::string& line, const std::string& key = "text") {
  std::string out;
  REQUIRE(parse_json_string_field(line, key, &out) == JsonFieldStatus::kFound);
  return out;
}

TEST_CASE("json reader decodes every string escape", "[json_reader]") {
  CHECK(field(R"({"text": "a\"b\\c\/d\b\f\n\r\t"})") == "a\"b\\c/d\b\f\n\r\t");
  CHECK(field(R"({"text": "\u00e9\u65E5"})") == "\xC3\xA9\xE6\x97\xA5");
  CHECK(field(R"({"text": "\ud83d\ude00"})") == "\xF0\x9F\x98\x80");  // surrogate pair
  CHECK(field(R"({"text": "\ud800x"})") == "\xEF\xBF\xBDx");          // lone high
  CHECK(field(R"({"text": "\udc00"})") == "\xEF\xBF\xBD");            // lone low
  CHECK(field(R"({"text": "\ud800\u0041"})") ==
        "\xEF\xBF\xBD"
        "A");  // high, then not low
  CHECK(field(R"({"text": "\u0000"})") == std::string(1, '\0'));
  CHECK(field("{\"text\": \"raw \xC3\xA9\"}") == "raw \xC3\xA9");
  CHECK(
      field(
          R"(  { "a" : {"text": 1}, "b": [[], {}, -0.5e-3, true, false, null], "text" : "x" }  )") ==
      "x");
}

TEST_CASE("json reader reports a missing or non-string key", "[json_reader]") {
  std::string out = "unchanged";
  CHECK(parse_json_string_field(R"({"body": "x"})", "text", &out) == JsonFieldStatus::kMissing);
  CHECK(parse_json_string_field("{}", "text", &out) == JsonFieldStatus::kMissing);
  CHECK(parse_json_string_field(R"({"text": null})", "text", &out) == JsonFieldStatus::kNotString);
  CHECK(parse_json_string_field(R"({"text": ["x"]})", "text", &out) == JsonFieldStatus::kNotString);
  CHECK(out == "unchanged");
  CHECK(field(R"({"text": 1, "text": "last wins"})") == "last wins");
}

TEST_CASE("json reader rejects malformed lines", "[json_reader]") {
  std::string out;
  for (const std::string& line : std::vector<std::string>{
           "", "{", "[]", "\"text\"", R"({"text": "x",})", R"({"text": "x"} extra)",
           R"({"text": "unterminated})", "{\"text\": \"ctrl\x01\"}", R"({"text": "\q"})",
           R"({"text": "\u12G4"})", R"({"text": 01})", R"({"text": tru})", R"({text: "x"})",
           R"({"text" "x"})", R"({"a": 1.})",
           "{\"a\": " + std::string(300, '[') + std::string(300, ']') + "}"}) {
    INFO(line);
    CHECK_THROWS_AS(parse_json_string_field(line, "text", &out), Error);
  }
  try {
    parse_json_string_field(R"({"text": "x",})", "text", &out);
  } catch (const Error& e) {
    CHECK_THAT(e.what(), Catch::Contains("byte 14"));
  }
}

TEST_CASE("json reader parses an object of integers", "[json_reader]") {
  const auto m = parse_json_string_int_object(R"({"a": 1, "\u0120b": 50256, "c": -3})", "f.json");
  REQUIRE(m.size() == 3);
  CHECK(m[1].first ==
        "\xC4\xA0"
        "b");
  CHECK(m[1].second == 50256);
  CHECK(m[2].second == -3);
  CHECK(parse_json_string_int_object("{}", "f.json").empty());
  CHECK_THROWS_AS(parse_json_string_int_object(R"({"a": 1.5})", "f.json"), Error);
  CHECK_THROWS_AS(parse_json_string_int_object(R"({"a": "1"})", "f.json"), Error);
  try {
    parse_json_string_int_object(R"({"a": 1)", "f.json");
  } catch (const Error& e) {
    CHECK(e.code() == Code::kCorruption);
    CHECK_THAT(e.what(), Catch::Contains("f.json"));
  }
}

TEST_CASE("json reader takes an array of strings, and tells another value apart", "[json_reader]") {
  auto a = parse_json_string_array(R"( ["a", "b\u00e9", "" ] )");
  REQUIRE(a.has_value());
  CHECK(*a == std::vector<std::string>{"a", "b\xc3\xa9", ""});
  CHECK(parse_json_string_array("[]").value().empty());
  CHECK_FALSE(parse_json_string_array(R"(["a", 1])").has_value());
  CHECK_FALSE(parse_json_string_array(R"({"a": ["b"]})").has_value());
  CHECK_FALSE(parse_json_string_array(R"("a")").has_value());
  CHECK_THROWS_AS(parse_json_string_array(R"(["a",])"), Error);
  CHECK_THROWS_AS(parse_json_string_array(R"(["a"] x)"), Error);
}

}  // namespace
}  // namespace mtnlg
