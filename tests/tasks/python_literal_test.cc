// ast.literal_eval's subset (data/tasks/python_literal.h) against Python: repr() of nested lists,
// tuples and dicts of strings with quotes, escapes, control and non-ASCII characters, numbers,
// True/False/None, read back and compared as JSON; malformed literals refused.
#include "data/tasks/python_literal.h"

#include <catch2/catch.hpp>

#include <string>

#include "core/metrics.h"
#include "core/status.h"
#include "tests/tasks/python_reference.h"

namespace mtnlg::tasks {
namespace {

std::string to_json(const PyValue& v) {
  switch (v.kind) {
    case PyValue::Kind::kNone:
      return "null";
    case PyValue::Kind::kBool:
      return v.boolean ? "true" : "false";
    case PyValue::Kind::kInt:
      return std::to_string(v.integer);
    case PyValue::Kind::kStr:
      return json_string(v.str);
    case PyValue::Kind::kList: {
      std::string s = "[";
      for (size_t i = 0; i < v.items.size(); ++i) {
        if (i > 0) s += ", ";
        s += to_json(v.items[i]);
      }
      return s + "]";
    }
    case PyValue::Kind::kDict: {
      std::string s = "{";
      for (size_t i = 0; i < v.dict.size(); ++i) {
        if (i > 0) s += ", ";
        s += to_json(v.dict[i].first);
        s += ": ";
        s += to_json(v.dict[i].second);
      }
      return s + "}";
    }
  }
  return "";
}

TEST_CASE("Python literals read as ast.literal_eval reads repr()") {
  // Python writes each value's repr() and then its JSON (the same value, compact, keys in
  // order); we read the repr and write JSON the same way.
  const std::string program = R"PY(
import json, random
rnd = random.Random(5)
alphabet = "ab 'c\"d\\\n\t\r\x07\x00é中😀_  ." + chr(0x2028) + chr(0x7f) + chr(0x9f)
def s():
    return "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 12)))
def v(d=0):
    k = rnd.randint(0, 7 if d < 3 else 3)
    if k == 0: return s()
    if k == 1: return rnd.randint(-10**12, 10**12)
    if k == 2: return rnd.choice([True, False, None])
    if k == 3: return s()
    if k == 4: return [v(d + 1) for _ in range(rnd.randint(0, 4))]
    if k == 5: return tuple(v(d + 1) for _ in range(rnd.randint(1, 3)))
    return {s(): v(d + 1) for _ in range(rnd.randint(0, 4))}
for _ in range(300):
    x = v()
    def plain(y):
        if isinstance(y, tuple): return [plain(z) for z in y]
        if isinstance(y, list): return [plain(z) for z in y]
        if isinstance(y, dict): return {k: plain(w) for k, w in y.items()}
        return y
    print(repr(x).encode().hex())
    print(json.dumps(plain(x), ensure_ascii=False).encode().hex())
)PY";
  std::istringstream in(python(program));
  const auto unhex = [](const std::string& h) {
    std::string out;
    for (size_t i = 0; i + 1 < h.size(); i += 2)
      out.push_back(static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16)));
    return out;
  };
  int n = 0;
  for (std::string r, j; std::getline(in, r) && std::getline(in, j); ++n) {
    const std::string literal = unhex(r), want = unhex(j);
    INFO("repr: " << literal);
    const std::string got = to_json(parse_python_literal(literal));
    // Python's json.dumps escapes only what JSON must; ours the same set (core/metrics.h).
    CHECK(got == want);
  }
  CHECK(n == 300);
  // Adjacent strings join; both quotes; a triple-quoted string; octal and \U escapes.
  CHECK(parse_python_literal(R"('a' "b")").str == "ab");
  CHECK(parse_python_literal("'''x'y'''").str == "x'y");
  CHECK(parse_python_literal(R"('\101\x42\u0043\U0001F600')").str == "ABC\xF0\x9F\x98\x80");
  CHECK(parse_python_literal("{'a': 1, 'a': 2}").at("a").integer == 2);
  for (const char* bad : {"[1, 2", "{'a' 1}", "'open", "[1] x", "f'x'", "{1, 2}", ""})
    CHECK_THROWS_AS(parse_python_literal(bad), Error);
}

}  // namespace
}  // namespace mtnlg::tasks
