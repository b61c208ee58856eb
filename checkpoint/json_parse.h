// A small strict JSON parser (RFC 8259) for the safetensors header.
//
// Why not yaml-cpp: JSON is YAML flow syntax, but yaml-cpp also accepts what JSON forbids
// (unquoted strings, single quotes, comments, duplicate keys), so a corrupt header could load.
// Strictness here means: one value, UTF-8 text, no trailing commas, no duplicate object keys,
// only whitespace after the value. Numbers keep their text so offsets parse exactly as int64.
// Values are plain data: copyable, no shared state; parsing is thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mtnlg {

struct JsonValue {
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };
  Kind kind = Kind::kNull;
  bool boolean = false;
  std::string text;              // kString: the decoded string; kNumber: the number as written
  std::vector<JsonValue> items;  // kArray
  std::vector<std::pair<std::string, JsonValue>> members;  // kObject, in file order

  bool is_object() const { return kind == Kind::kObject; }
  bool is_array() const { return kind == Kind::kArray; }
  bool is_string() const { return kind == Kind::kString; }
  bool is_number() const { return kind == Kind::kNumber; }
  // The member named `key`, or nullptr.
  const JsonValue* find(std::string_view key) const;
  // A number with no fraction or exponent that fits in int64; false otherwise.
  bool to_int64(int64_t* out) const;
};

const char* json_kind_name(JsonValue::Kind kind);

// Parses `text`; throws mtnlg::Error (corruption) naming `what` (e.g. the file) and the byte
// offset of the first error.
JsonValue parse_json(std::string_view text, const std::string& what);

}  // namespace mtnlg
