// A minimal strict JSON reader for the two JSON inputs of data/: GPT-2's encoder.json (one
// object of string -> integer) and the documents of a JSON-lines corpus (one object per line,
// one string field wanted). Values that are not needed are validated and skipped, never built.
//
// Why not checkpoint/json_parse.h: data/ must not depend on checkpoint/, and building a tree
// of 50k members for encoder.json, or of every field of every corpus line, is wasted work.
//
// Strings are decoded with every escape, \uXXXX included; a surrogate pair becomes one code
// point, and a lone surrogate (which UTF-8 cannot hold; Python would fail to encode it) becomes
// U+FFFD. Raw bytes inside strings are copied as they are (invalid UTF-8 is the tokenizer's
// business). Errors throw mtnlg::Error (corruption) with the byte offset of the problem.
//
// Free functions without state: safe from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mtnlg {

// Parses `text` as one JSON object whose values are all integers; `what` names the file in
// errors. Members come back in file order.
std::vector<std::pair<std::string, int64_t>> parse_json_string_int_object(std::string_view text,
                                                                          const std::string& what);

enum class JsonFieldStatus { kFound, kMissing, kNotString };

// Parses `line` as one JSON object and stores the value of member `key` in *out when it is a
// string. Returns kMissing or kNotString otherwise (*out untouched); throws corruption (message
// without context: the caller adds file and line) if `line` is not one valid JSON object.
// A key that appears twice: the last one wins, as in Python's json module.
JsonFieldStatus parse_json_string_field(std::string_view line, std::string_view key,
                                        std::string* out);

// Parses `raw` as one JSON value: its strings when it is an array of strings, nullopt when it is
// another valid value; throws corruption (message without context) when it is not valid JSON.
std::optional<std::vector<std::string>> parse_json_string_array(std::string_view raw);

// One member of a JSON object: its decoded key and its value's raw JSON text (a view into the
// parsed line), so that a stage can rewrite one member and carry the others through unchanged.
struct JsonMember {
  std::string key;
  std::string_view raw;
};

// Parses `line` as one JSON object and returns its members in order; throws corruption (message
// without context) if it is not one valid JSON object.
std::vector<JsonMember> parse_json_object_members(std::string_view line);

}  // namespace mtnlg
