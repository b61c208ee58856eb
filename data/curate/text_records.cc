#include "data/curate/text_records.h"

#include "core/metrics.h"
#include "core/status.h"
#include "data/json_reader.h"
#include "data/unicode_classes.h"

namespace mtnlg::curate {

BadRecords parse_bad_records(const std::string& name, const std::string& flag) {
  if (name == "error") return BadRecords::kError;
  if (name == "skip") return BadRecords::kSkip;
  throw invalid_argument(flag + ": '" + name +
                             "'; the fix: error (stop at the first bad record) "
                             "or skip (skip and count them in the report)",
                         flag);
}

TextRecords::TextRecords(const std::string& path, std::string text_key, BadRecords bad)
    : reader_(path), key_(std::move(text_key)), bad_(bad) {}

bool TextRecords::next_batch(std::vector<TextRecord>* batch, size_t max_bytes) {
  batch->clear();
  size_t bytes = 0;
  while (bytes < max_bytes && reader_.next(&line_)) {
    if (line_.find_first_not_of(" \t\r") == std::string::npos) continue;
    TextRecord r;
    r.line = reader_.line_number();
    std::string why, fix;
    try {
      switch (parse_json_string_field(line_, key_, &r.text)) {
        case JsonFieldStatus::kFound:
          if (!is_valid_utf8(r.text)) {
            why = "invalid UTF-8";
            fix = "re-encode the shard as UTF-8";
          }
          break;
        case JsonFieldStatus::kMissing:
          why = "no text key";
          fix = "name the documents' key with --text-key (now '" + key_ + "')";
          break;
        case JsonFieldStatus::kNotString:
          why = "text not a string";
          fix = "the '" + key_ + "' value must be a JSON string";
          break;
      }
    } catch (const Error& e) {
      why = "not JSON";
      fix = e.message();
    }
    if (!why.empty()) {
      if (bad_ == BadRecords::kError)
        throw invalid_argument("line " + std::to_string(r.line) + ": " + why + "; the fix: " + fix +
                                   ", or pass --bad-records skip to skip such records (counted in "
                                   "the report)",
                               reader_.path() + ":" + std::to_string(r.line));
      ++skipped_[why];
      continue;
    }
    bytes += line_.size() + 1;
    r.raw = std::move(line_);
    line_.clear();
    batch->push_back(std::move(r));
  }
  return !batch->empty();
}

std::string rewrite_record(std::string_view raw,
                           const std::vector<std::pair<std::string, std::string>>& set) {
  const std::vector<JsonMember> members = parse_json_object_members(raw);
  std::string out = "{";
  const auto add = [&](const std::string& key, std::string_view value) {
    if (out.size() > 1) out += ", ";
    out += json_string(key);
    out += ": ";
    out += value;
  };
  std::vector<char> placed(set.size(), 0);
  for (const JsonMember& m : members) {
    std::string_view value = m.raw;
    for (size_t i = 0; i < set.size(); ++i)
      if (set[i].first == m.key) {
        value = set[i].second;
        placed[i] = 1;
      }
    add(m.key, value);
  }
  for (size_t i = 0; i < set.size(); ++i)
    if (!placed[i]) add(set[i].first, set[i].second);
  return out + "}";
}

}  // namespace mtnlg::curate
