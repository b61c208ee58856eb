// Typed reads of one recipe scalar: integers (also written 1e9-style when exact), doubles,
// booleans and strings, each failing with the key path and what to write instead.
#include <fmt/format.h>

#include <charconv>
#include <cmath>

#include "core/config/recipe_yaml.h"
#include "core/status.h"

namespace mtnlg::recipe_detail {
namespace {

// A quoted scalar ('1920' or "1920") is a string in YAML, even when it looks like a number.
bool is_quoted(const YAML::Node& node) {
  return node.Tag() == "!";
}

// The scalar's text, or throws if `node` is not a plain (unquoted) scalar.
std::string plain_scalar(const YAML::Node& node, const std::string& path, const char* want,
                         const char* example) {
  if (!node.IsScalar()) {
    throw invalid_argument(
        fmt::format("expected {}, got {}; write {}: {}", want, describe(node), path, example),
        path);
  }
  if (is_quoted(node)) {
    throw invalid_argument(fmt::format("expected {}, got {}; remove the quotes, e.g. {}: {}", want,
                                       describe(node), path, example),
                           path);
  }
  std::string text = node.Scalar();
  if (!text.empty() && text[0] == '+') text.erase(0, 1);  // from_chars takes no '+'
  return text;
}

std::optional<double> parse_double(const std::string& text) {
  double value = 0.0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size()) return std::nullopt;
  return value;
}

// An integer written as a float (270e9): accepted only if it is exact and in [lo, hi).
template <typename T>
T exact_integer(const std::string& text, const std::string& path, double lo, double hi) {
  const std::optional<double> d = parse_double(text);
  if (!d || !std::isfinite(*d)) {
    throw invalid_argument(
        fmt::format("expected an integer, got '{}'; write a whole number such as 1024 or 270e9",
                    text),
        path);
  }
  if (*d != std::floor(*d)) {
    throw invalid_argument(fmt::format("expected an integer, got {}; this key takes a whole "
                                       "number (1e9-style is fine when it is exact)",
                                       text),
                           path);
  }
  if (*d < lo || *d >= hi) {
    throw invalid_argument(fmt::format("{} is out of range for this integer key", text), path);
  }
  return static_cast<T>(*d);
}

}  // namespace

int64_t to_int(const YAML::Node& node, const std::string& path) {
  const std::string text = plain_scalar(node, path, "an integer", "1024");
  int64_t value = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec == std::errc() && ptr == text.data() + text.size()) return value;
  return exact_integer<int64_t>(text, path, -9223372036854775808.0, 9223372036854775808.0);
}

uint64_t to_uint(const YAML::Node& node, const std::string& path) {
  const std::string text = plain_scalar(node, path, "a non-negative integer", "1234");
  if (!text.empty() && text[0] == '-') {
    throw invalid_argument(fmt::format("must be a non-negative integer, got {}", text), path);
  }
  uint64_t value = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec == std::errc() && ptr == text.data() + text.size()) return value;
  return exact_integer<uint64_t>(text, path, 0.0, 18446744073709551616.0);
}

double to_double(const YAML::Node& node, const std::string& path) {
  const std::string text = plain_scalar(node, path, "a number", "1.0e-4");
  const std::optional<double> value = parse_double(text);
  if (!value || !std::isfinite(*value)) {
    throw invalid_argument(
        fmt::format("expected a finite number, got '{}'; write e.g. 0.1 or 1.0e-4", text), path);
  }
  return *value;
}

bool to_bool(const YAML::Node& node, const std::string& path) {
  const std::string text = plain_scalar(node, path, "true or false", "true");
  bool value = false;
  if (!YAML::convert<bool>::decode(node, value)) {
    throw invalid_argument(fmt::format("expected true or false, got '{}'", text), path);
  }
  return value;
}

std::string to_string(const YAML::Node& node, const std::string& path) {
  if (!node.IsScalar()) {
    throw invalid_argument(
        fmt::format("expected a string, got {}; write {}: some/path", describe(node), path), path);
  }
  return node.Scalar();
}

std::string describe(const YAML::Node& node) {
  if (!node.IsDefined() || node.IsNull()) return "nothing";
  if (node.IsMap()) return "a map";
  if (node.IsSequence()) return "a list";
  if (is_quoted(node)) return fmt::format("the string \"{}\"", node.Scalar());
  return fmt::format("'{}'", node.Scalar());
}

}  // namespace mtnlg::recipe_detail
