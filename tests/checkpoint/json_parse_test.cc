#include "checkpoint/json_parse.h"

#include <catch2/catch.hpp>

#include "core/status.h"

namespace mtnlg {
namespace {

TEST_CASE("parses JSON values - escapes and exact integers") {
  const JsonValue v = parse_json(
      R"( {"a": [1, -2, 3.5e2, true, false, null], "s": "x\"\\\/\n\u00e9\ud83d\ude00",
          "big": 9007199254740993, "o": {}} )",
      "test");
  REQUIRE(v.is_object());
  const JsonValue* a = v.find("a");
  REQUIRE(a);
  REQUIRE(a->items.size() == 6);
  int64_t n = 0;
  CHECK(a->items[1].to_int64(&n));
  CHECK(n == -2);
  CHECK_FALSE(a->items[2].to_int64(&n));
  CHECK(a->items[3].boolean);
  CHECK(a->items[5].kind == JsonValue::Kind::kNull);
  CHECK(v.find("s")->text == "x\"\\/\n\xc3\xa9\xf0\x9f\x98\x80");
  CHECK(v.find("big")->to_int64(&n));
  CHECK(n == 9007199254740993);  // beyond double precision: kept exact
  CHECK(v.find("o")->is_object());
  CHECK(v.find("nope") == nullptr);
}

TEST_CASE("rejects what JSON forbids - naming the offset") {
  for (const char* bad :
       {"", "{", "{a:1}", "{'a':1}", "[1,]", "{\"a\":1,}", "01", "1.", "-", "\"\x01\"", "\"\\x\"",
        "{\"a\":1,\"a\":2}", "[1] 2", "tru", "\"\\ud800\"", "[1 2]", "// c\n1"}) {
    INFO(bad);
    try {
      parse_json(bad, "file.json");
      FAIL("accepted");
    } catch (const Error& e) {
      CHECK(e.code() == Code::kCorruption);
      CHECK(std::string(e.what()).find("file.json") != std::string::npos);
      CHECK(std::string(e.what()).find("at byte") != std::string::npos);
    }
  }
  std::string deep(100, '[');
  CHECK_THROWS_AS(parse_json(deep + std::string(100, ']'), "deep"), Error);
}

}  // namespace
}  // namespace mtnlg
