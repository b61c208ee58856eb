#include "data/json_reader.h"

#include <charconv>
#include <limits>

#include "core/json_scan.h"
#include "core/status.h"
#include "data/unicode_classes.h"

namespace mtnlg {

namespace {

// A cursor over JSON text; every method throws corruption("... at byte N") on malformed input.
class JsonCursor {
 public:
  static constexpr int kMaxDepth = 256;

  explicit JsonCursor(std::string_view text) : text_(text) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw corruption("invalid JSON: " + what + " at byte " + std::to_string(pos_ + 1));
  }

  void skip_ws() {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
      ++pos_;
    }
  }
  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[pos_]; }

  void expect(char c) {
    skip_ws();
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++pos_;
  }

  // Reads a string (cursor on the opening quote) into *out, or skips it when out is null.
  void string(std::string* out) {
    skip_ws();
    if (peek() != '"') fail("expected a string");
    ++pos_;
    if (out != nullptr) out->clear();
    while (true) {
      // Copy the run up to the next quote, backslash or control character at once.
      const size_t run = json_plain_run_end(text_, pos_);
      if (out != nullptr) out->append(text_.substr(pos_, run - pos_));
      pos_ = run;
      if (at_end()) fail("unterminated string");
      const char c = text_[pos_];
      if (c == '"') {
        ++pos_;
        return;
      }
      if (c != '\\') fail("unescaped control character in string");
      ++pos_;
      escape(out);
    }
  }

  // Skips any value. Nesting is bounded so that a hostile line cannot overflow the stack.
  void value(int depth = 0) {
    if (depth > kMaxDepth) fail("nesting deeper than " + std::to_string(kMaxDepth));
    skip_ws();
    const char c = peek();
    if (c == '"') {
      string(nullptr);
    } else if (c == '{') {
      ++pos_;
      skip_ws();
      if (peek() == '}') {
        ++pos_;
        return;
      }
      while (true) {
        string(nullptr);
        expect(':');
        value(depth + 1);
        if (!list_continues('}')) return;
      }
    } else if (c == '[') {
      ++pos_;
      skip_ws();
      if (peek() == ']') {
        ++pos_;
        return;
      }
      while (true) {
        value(depth + 1);
        if (!list_continues(']')) return;
      }
    } else if (c == 't') {
      literal("true");
    } else if (c == 'f') {
      literal("false");
    } else if (c == 'n') {
      literal("null");
    } else {
      number();
    }
  }

  // Reads an integer value.
  int64_t integer() {
    skip_ws();
    const size_t start = pos_;
    const std::string_view text = number();
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size()) {
      pos_ = start;
      fail("expected an integer");
    }
    return v;
  }

  // After a member or element: consumes ',' (true: another follows) or `close` (false).
  bool list_continues(char close) {
    skip_ws();
    if (peek() == ',') {
      ++pos_;
      return true;
    }
    if (peek() == close) {
      ++pos_;
      return false;
    }
    fail(std::string("expected ',' or '") + close + "'");
  }

  size_t pos() const { return pos_; }

  void expect_end() {
    skip_ws();
    if (!at_end()) fail("unexpected text after the value");
  }

 private:
  void literal(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) fail("unknown literal");
    pos_ += word.size();
  }

  // Validates a number's syntax (RFC 8259) and returns its text.
  std::string_view number() {
    const size_t start = pos_;
    auto digits = [&] {
      const size_t from = pos_;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
      return pos_ > from;
    };
    if (peek() == '-') ++pos_;
    if (peek() == '0') {
      ++pos_;
    } else if (!digits()) {
      fail("expected a value");
    }
    if (peek() == '.') {
      ++pos_;
      if (!digits()) fail("expected digits after '.'");
    }
    if (peek() == 'e' || peek() == 'E') {
      ++pos_;
      if (peek() == '+' || peek() == '-') ++pos_;
      if (!digits()) fail("expected digits in the exponent");
    }
    return text_.substr(start, pos_ - start);
  }

  unsigned hex4() {
    if (pos_ + 4 > text_.size()) fail("truncated \\u escape");
    unsigned v = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = text_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9') {
        v |= static_cast<unsigned>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        v |= static_cast<unsigned>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        v |= static_cast<unsigned>(c - 'A' + 10);
      } else {
        --pos_;
        fail("bad hex digit in \\u escape");
      }
    }
    return v;
  }

  // The escape after a backslash (cursor on the escape letter).
  void escape(std::string* out) {
    if (at_end()) fail("unterminated string");
    const char c = text_[pos_++];
    char plain = 0;
    switch (c) {
      case '"':
        plain = '"';
        break;
      case '\\':
        plain = '\\';
        break;
      case '/':
        plain = '/';
        break;
      case 'b':
        plain = '\b';
        break;
      case 'f':
        plain = '\f';
        break;
      case 'n':
        plain = '\n';
        break;
      case 'r':
        plain = '\r';
        break;
      case 't':
        plain = '\t';
        break;
      case 'u':
        break;
      default:
        --pos_;
        fail("unknown escape");
    }
    if (c != 'u') {
      if (out != nullptr) out->push_back(plain);
      return;
    }
    char32_t cp = hex4();
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      // A high surrogate pairs with an immediately following \uDC00-\uDFFF escape.
      if (text_.substr(pos_, 2) == "\\u") {
        const size_t save = pos_;
        pos_ += 2;
        const char32_t low = hex4();
        if (low >= 0xDC00 && low <= 0xDFFF) {
          cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        } else {
          pos_ = save;  // not a pair: this one is lone, the next escape is read on its own
          cp = kReplacementChar;
        }
      } else {
        cp = kReplacementChar;
      }
    } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
      cp = kReplacementChar;
    }
    if (out != nullptr) append_utf8(cp, *out);
  }

  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

std::vector<std::pair<std::string, int64_t>> parse_json_string_int_object(std::string_view text,
                                                                          const std::string& what) {
  std::vector<std::pair<std::string, int64_t>> members;
  try {
    JsonCursor in(text);
    in.expect('{');
    in.skip_ws();
    if (in.peek() == '}') {
      in.expect('}');
    } else {
      do {
        std::string key;
        in.string(&key);
        in.expect(':');
        const int64_t v = in.integer();
        members.emplace_back(std::move(key), v);
      } while (in.list_continues('}'));
    }
    in.expect_end();
  } catch (const Error& e) {
    throw corruption(e.message() +
                         "; the fix: use GPT-2's encoder.json (a JSON object of "
                         "token -> id)",
                     what);
  }
  return members;
}

JsonFieldStatus parse_json_string_field(std::string_view line, std::string_view key,
                                        std::string* out) {
  JsonCursor in(line);
  in.expect('{');
  in.skip_ws();
  JsonFieldStatus status = JsonFieldStatus::kMissing;
  if (in.peek() == '}') {
    in.expect('}');
    in.expect_end();
    return status;
  }
  std::string name;
  do {
    in.string(&name);
    in.expect(':');
    if (name == key) {
      in.skip_ws();
      if (in.peek() == '"') {
        in.string(out);
        status = JsonFieldStatus::kFound;
      } else {
        in.value();
        status = JsonFieldStatus::kNotString;
      }
    } else {
      in.value();
    }
  } while (in.list_continues('}'));
  in.expect_end();
  return status;
}

std::optional<std::vector<std::string>> parse_json_string_array(std::string_view raw) {
  JsonCursor in(raw);
  in.skip_ws();
  if (in.peek() != '[') {
    in.value();
    in.expect_end();
    return std::nullopt;
  }
  in.expect('[');
  std::vector<std::string> out;
  bool strings = true;
  in.skip_ws();
  if (in.peek() == ']') {
    in.expect(']');
  } else {
    do {
      in.skip_ws();
      if (in.peek() == '"') {
        out.emplace_back();
        in.string(&out.back());
      } else {
        in.value();
        strings = false;
      }
    } while (in.list_continues(']'));
  }
  in.expect_end();
  if (!strings) return std::nullopt;
  return out;
}

std::vector<JsonMember> parse_json_object_members(std::string_view line) {
  JsonCursor in(line);
  std::vector<JsonMember> members;
  in.expect('{');
  in.skip_ws();
  if (in.peek() == '}') {
    in.expect('}');
  } else {
    do {
      JsonMember m;
      in.string(&m.key);
      in.expect(':');
      in.skip_ws();
      const size_t start = in.pos();
      in.value();
      m.raw = line.substr(start, in.pos() - start);
      members.push_back(std::move(m));
    } while (in.list_continues('}'));
  }
  in.expect_end();
  return members;
}

}  // namespace mtnlg
