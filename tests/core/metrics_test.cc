#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <limits>

#include "core/metrics.h"
#include "core/status.h"
#include "test_util.h"

using namespace mtnlg;

TEST_CASE("numbers are written at full precision and round-trip") {
  for (double v : {0.1, 1.0 / 3.0, 10.836274128, 1e-300, 5e-324, 123456789.123456789, -2.5}) {
    const std::string s = json_number(v);
    CHECK(std::strtod(s.c_str(), nullptr) == v);
  }
  CHECK(json_number(3.0) == "3");
  CHECK(json_number(std::nan("")) == "null");
  CHECK(json_number(std::numeric_limits<double>::infinity()) == "null");
}

TEST_CASE("strings are escaped") {
  CHECK(json_string("a\"b\\c\n") == "\"a\\\"b\\\\c\\n\"");
  CHECK(json_string(std::string("\x01", 1)) == "\"\\u0001\"");
}

TEST_CASE(
    "invalid UTF-8 becomes U+FFFD as Python's decode(errors='replace') - the line stays JSON") {
  // Expected values: Python 3.11, bytes.decode("utf-8", "replace").encode("utf-8").
  const std::string r = "\xEF\xBF\xBD";
  const std::pair<std::string, std::string> cases[] = {
      {"ok \xff x", "ok " + r + " x"},
      {"\xe2\x82", r},                   // a truncated sequence: one replacement
      {"\xe2\x82\xac", "\xe2\x82\xac"},  // the euro sign, kept
      {"\xe2(\xa1", r + "(" + r},
      {"\xed\xa0\x80", r + r + r},  // a surrogate
      {"\xf0\x9f\x98", r},
      {"\xf0\x9f\x98\x80", "\xf0\x9f\x98\x80"},
      {"\xc0\xaf", r + r},                  // overlong
      {"\xf4\x90\x80\x80", r + r + r + r},  // above U+10FFFF
      {"\x80\x80"
       "a",
       r + r + "a"},
      {"caf\xc3\xa9", "caf\xc3\xa9"},
  };
  for (const auto& [in, want] : cases) {
    INFO(in);
    CHECK(json_string(in) == "\"" + want + "\"");
  }
}

TEST_CASE("a metrics line is one JSON object - the writer truncates or appends") {
  test::TempDir dir;
  const std::string path = dir.file("sub/metrics.jsonl");
  {
    MetricsWriter w(path, false);
    w.write(JsonLine().add("iteration", int64_t{1}).add("loss", 0.5).add("split", "train"));
  }
  CHECK(test::read_file(path) == "{\"iteration\": 1, \"loss\": 0.5, \"split\": \"train\"}\n");
  {
    MetricsWriter w(path, true);
    w.write(JsonLine().add("iteration", int64_t{2}));
  }
  CHECK(test::read_file(path) ==
        "{\"iteration\": 1, \"loss\": 0.5, \"split\": \"train\"}\n{\"iteration\": 2}\n");
  { MetricsWriter w(path, false); }
  CHECK(test::read_file(path).empty());
}

TEST_CASE("an unwritable metrics path is an I/O error naming it") {
  test::TempDir dir;
  test::write_file(dir.file("file"), "x");
  try {
    MetricsWriter w(dir.file("file/metrics.jsonl"), false);
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(e.code() == Code::kIOError);
    CHECK(e.context() == dir.file("file/metrics.jsonl"));
  }
}

TEST_CASE("a resumed run's metrics are cut back to the checkpoint - a torn last line goes too") {
  test::TempDir d;
  const std::string path = d.file("m.jsonl");
  test::write_file(path,
                   "{\"iteration\": 1, \"split\": \"train\"}\n"
                   "{\"iteration\": 2, \"split\": \"train\"}\n"
                   "{\"iteration\": 2, \"split\": \"valid\"}\n"
                   "{\"iteration\": 3, \"split\": \"train\"}\n"
                   "{\"iteration\": 4, \"spl");
  CHECK(truncate_metrics_file(path, 2) == 2);
  CHECK(test::read_file(path) ==
        "{\"iteration\": 1, \"split\": \"train\"}\n"
        "{\"iteration\": 2, \"split\": \"train\"}\n"
        "{\"iteration\": 2, \"split\": \"valid\"}\n");
  CHECK(truncate_metrics_file(path, 5) == 0);
  CHECK(truncate_metrics_file(d.file("missing.jsonl"), 5) == 0);
  test::write_file(path, "{\"iteration\": 1}\ngarbage\n{\"iteration\": 2}\n");
  CHECK(truncate_metrics_file(path, 9) == 2);
  CHECK(test::read_file(path) == "{\"iteration\": 1}\n");
}
