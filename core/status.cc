#include "core/status.h"

namespace mtnlg {

const char* code_name(Code code) {
  switch (code) {
    case Code::kInvalidArgument:
      return "invalid argument";
    case Code::kNotFound:
      return "not found";
    case Code::kCorruption:
      return "corruption";
    case Code::kIOError:
      return "I/O error";
    case Code::kUnsupported:
      return "not yet supported";
    case Code::kDiverged:
      return "diverged";
    case Code::kInternal:
      return "internal error";
  }
  return "error";
}

int exit_status(Code code) {
  switch (code) {
    case Code::kInvalidArgument:
      return 2;
    case Code::kUnsupported:
      return 3;
    case Code::kNotFound:
    case Code::kCorruption:
    case Code::kIOError:
      return 4;
    case Code::kDiverged:
    case Code::kInternal:
      return 1;
  }
  return 1;
}

namespace {

// Control characters written as escapes: an error is one log line whatever user text it quotes
// (a key with a newline in it, a path with an ANSI escape), so grep and the terminal see it whole.
void append_escaped(std::string& out, const std::string& text) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    } else {
      out += c;
    }
  }
}

}  // namespace

std::string Error::format(Code code, const std::string& message, const std::string& context) {
  std::string out = code_name(code);
  if (!context.empty()) {
    out += " [";
    append_escaped(out, context);
    out += "]";
  }
  out += ": ";
  append_escaped(out, message);
  return out;
}

namespace detail {
void check_failed(const char* file, int line, const std::string& what) {
  throw Error(Code::kInternal, what, std::string(file) + ":" + std::to_string(line));
}
}  // namespace detail

}  // namespace mtnlg
