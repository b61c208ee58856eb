#include "data/tasks/python_literal.h"

#include <cctype>

#include "core/status.h"
#include "data/python_text.h"

namespace mtnlg::tasks {
namespace {

class Parser {
 public:
  explicit Parser(std::string_view t) : t_(t) {}

  PyValue value(int depth = 0) {
    if (depth > 64) fail("nested too deeply");
    ws();
    if (at_end()) fail("a value was expected");
    const char c = t_[i_];
    if (c == '[' || c == '(') return sequence(c == '[' ? ']' : ')', depth);
    if (c == '{') return dict(depth);
    if (c == '\'' || c == '"') return strings();
    if (c == '-' || c == '+' || std::isdigit(static_cast<unsigned char>(c))) return integer();
    for (const auto& [word, kind, b] : {std::tuple{"True", PyValue::Kind::kBool, true},
                                        std::tuple{"False", PyValue::Kind::kBool, false},
                                        std::tuple{"None", PyValue::Kind::kNone, false}}) {
      const std::string_view w(word);
      if (t_.substr(i_, w.size()) == w) {
        i_ += w.size();
        PyValue v;
        v.kind = kind;
        v.boolean = b;
        return v;
      }
    }
    fail(std::string("unexpected '") + c + "'");
  }

  void end() {
    ws();
    if (!at_end()) fail("text after the value");
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw invalid_argument("not a Python literal: " + what + " at byte " + std::to_string(i_),
                           "literal_eval");
  }
  bool at_end() const { return i_ >= t_.size(); }
  void ws() {
    while (!at_end() && (t_[i_] == ' ' || t_[i_] == '\t' || t_[i_] == '\n' || t_[i_] == '\r')) ++i_;
  }
  PyValue sequence(char close, int depth) {
    ++i_;
    PyValue v;
    v.kind = PyValue::Kind::kList;
    ws();
    while (!at_end() && t_[i_] != close) {
      v.items.push_back(value(depth + 1));
      ws();
      if (!at_end() && t_[i_] == ',') {
        ++i_;
        ws();
      } else if (at_end() || t_[i_] != close) {
        fail(std::string("',' or '") + close + "' expected");
      }
    }
    if (at_end()) fail(std::string("'") + close + "' expected");
    ++i_;
    return v;
  }
  PyValue dict(int depth) {
    ++i_;
    PyValue v;
    v.kind = PyValue::Kind::kDict;
    ws();
    while (!at_end() && t_[i_] != '}') {
      PyValue k = value(depth + 1);
      ws();
      if (at_end() || t_[i_] != ':') fail("':' expected");
      ++i_;
      v.dict.emplace_back(std::move(k), value(depth + 1));
      ws();
      if (!at_end() && t_[i_] == ',') {
        ++i_;
        ws();
      } else if (at_end() || t_[i_] != '}') {
        fail("',' or '}' expected");
      }
    }
    if (at_end()) fail("'}' expected");
    ++i_;
    return v;
  }
  PyValue integer() {
    const size_t start = i_;
    if (t_[i_] == '-' || t_[i_] == '+') ++i_;
    while (!at_end() && std::isdigit(static_cast<unsigned char>(t_[i_]))) ++i_;
    PyValue v;
    v.kind = PyValue::Kind::kInt;
    try {
      v.integer = std::stoll(std::string(t_.substr(start, i_ - start)));
    } catch (const std::exception&) {
      fail("an integer expected");
    }
    return v;
  }
  PyValue strings() {  // adjacent literals are one string, as in Python
    PyValue v;
    v.kind = PyValue::Kind::kStr;
    do {
      v.str += one_string();
      ws();
    } while (!at_end() && (t_[i_] == '\'' || t_[i_] == '"'));
    return v;
  }
  unsigned hex(size_t n) {
    if (i_ + n > t_.size()) fail("a short escape");
    unsigned x = 0;
    for (size_t k = 0; k < n; ++k) {
      const char c = t_[i_ + k];
      x <<= 4;
      if (c >= '0' && c <= '9')
        x |= static_cast<unsigned>(c - '0');
      else if (c >= 'a' && c <= 'f')
        x |= static_cast<unsigned>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        x |= static_cast<unsigned>(c - 'A' + 10);
      else
        fail("a bad hex escape");
    }
    i_ += n;
    return x;
  }
  std::string one_string() {
    const char q = t_[i_++];
    const bool triple = t_.substr(i_, 2) == std::string(2, q);
    if (triple) i_ += 2;
    std::u32string out;
    while (true) {
      if (at_end()) fail("an unterminated string");
      const char c = t_[i_];
      if (c == q && (!triple || t_.substr(i_, 3) == std::string(3, q))) {
        i_ += triple ? 3 : 1;
        break;
      }
      if (c == '\n' && !triple) fail("a line break in a string");
      if (c != '\\') {  // UTF-8 bytes as they are: decode one code point
        const size_t start = i_;
        ++i_;
        while (!at_end() && (static_cast<unsigned char>(t_[i_]) & 0xC0) == 0x80) ++i_;
        out += utf8_to_u32(t_.substr(start, i_ - start));
        continue;
      }
      ++i_;
      if (at_end()) fail("a lone backslash");
      const char e = t_[i_++];
      switch (e) {
        case '\n':
          break;  // a line continuation
        case '\\':
          out.push_back(U'\\');
          break;
        case '\'':
          out.push_back(U'\'');
          break;
        case '"':
          out.push_back(U'"');
          break;
        case 'n':
          out.push_back(U'\n');
          break;
        case 't':
          out.push_back(U'\t');
          break;
        case 'r':
          out.push_back(U'\r');
          break;
        case 'a':
          out.push_back(U'\a');
          break;
        case 'b':
          out.push_back(U'\b');
          break;
        case 'f':
          out.push_back(U'\f');
          break;
        case 'v':
          out.push_back(U'\v');
          break;
        case 'x':
          out.push_back(hex(2));
          break;
        case 'u':
          out.push_back(hex(4));
          break;
        case 'U':
          out.push_back(hex(8));
          break;
        default:
          if (e >= '0' && e <= '7') {  // up to three octal digits
            unsigned x = static_cast<unsigned>(e - '0');
            for (int k = 0; k < 2 && !at_end() && t_[i_] >= '0' && t_[i_] <= '7'; ++k)
              x = x * 8 + static_cast<unsigned>(t_[i_++] - '0');
            out.push_back(x);
          } else {  // Python keeps an unknown escape as it is
            out.push_back(U'\\');
            out.push_back(static_cast<unsigned char>(e));
          }
      }
    }
    return u32_to_utf8(out);
  }

  std::string_view t_;
  size_t i_ = 0;
};

}  // namespace

const PyValue& PyValue::at(const std::string& key) const {
  if (kind == Kind::kDict)
    for (auto it = dict.rbegin(); it != dict.rend(); ++it)  // a repeated key: the last wins
      if (it->first.kind == Kind::kStr && it->first.str == key) return it->second;
  throw invalid_argument("no \"" + key + "\" in the literal", key);
}

PyValue parse_python_literal(std::string_view text) {
  Parser p(text);
  PyValue v = p.value();
  p.end();
  return v;
}

}  // namespace mtnlg::tasks
