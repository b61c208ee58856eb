// TextRecords: the documents of one JSON Lines shard (data/curate/line_reader.h: plain, .gz or
// .zst), each its raw line (the stages write kept lines back unchanged, every other key carried
// through) and the string value of the text key, in batches of bounded size.
//
// A record that is not a JSON object, lacks the text key, has a non-string text, or whose text
// is not valid UTF-8 is an error naming the file, the line and the fix (BadRecords::kError), or
// is skipped and counted by reason (kSkip: the stage reports the counts). Blank lines are not
// records (as mtnlg-preprocess reads JSON Lines).
//
// Not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "data/curate/line_reader.h"

namespace mtnlg::curate {

enum class BadRecords { kError, kSkip };

// "error" or "skip"; throws invalid_argument naming `flag` otherwise.
BadRecords parse_bad_records(const std::string& name, const std::string& flag);

struct TextRecord {
  int64_t line = 0;  // 1-based line number in its file
  std::string raw;   // the line as read
  std::string text;  // the text key's value, decoded
};

class TextRecords {
 public:
  TextRecords(const std::string& path, std::string text_key, BadRecords bad);

  // Replaces *batch with the next records, about max_bytes of lines; false when none are left.
  bool next_batch(std::vector<TextRecord>* batch, size_t max_bytes);

  // Skipped records by reason ("not JSON", "no text key", "text not a string", "invalid
  // UTF-8"), with kSkip.
  const std::map<std::string, int64_t>& skipped() const { return skipped_; }
  int64_t bytes_read() const { return reader_.bytes_read(); }
  int64_t file_size() const { return reader_.file_size(); }

 private:
  LineReader reader_;
  std::string key_;
  BadRecords bad_;
  std::map<std::string, int64_t> skipped_;
  std::string line_;
};

// The record `raw` (one JSON object) with members set: each (key, JSON value text) replaces the
// member's value in place, or is appended when the record has no such member; every other member
// is carried through as it was written. Throws corruption if `raw` is not a JSON object.
std::string rewrite_record(std::string_view raw,
                           const std::vector<std::pair<std::string, std::string>>& set);

}  // namespace mtnlg::curate
