// WarcReader: the records of a WARC file (ISO 28500: WARC/1.0 and 1.1), plain or gzip (.warc.gz,
// a member per record or one stream). Each record: its version line, its named fields (case
// kept, looked up case-insensitively) and its block of exactly Content-Length bytes, followed by
// an empty line (CRLF CRLF).
//
// A record whose version line is missing where the previous record's Content-Length said the next
// one starts (a wrong length), a missing or non-numeric Content-Length, or a file that ends inside
// a block throws corruption naming the file, the record's number and what was found.
//
// Not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "data/curate/line_reader.h"

namespace mtnlg::curate {

struct WarcRecord {
  int64_t number = 0;  // 1-based, in file order
  std::vector<std::pair<std::string, std::string>> fields;
  std::string block;
  // The value of field `name` (case-insensitive), or "".
  std::string field(const std::string& name) const;
};

class WarcReader {
 public:
  explicit WarcReader(const std::string& path) : reader_(path) {}
  bool next(WarcRecord* record);  // false at the end
  int64_t bytes_read() const { return reader_.bytes_read(); }
  int64_t file_size() const { return reader_.file_size(); }

 private:
  LineReader reader_;
  int64_t records_ = 0;
};

// An HTTP response (a WARC "response" record's block) split into its header fields and body;
// false when it is not an HTTP/1.x response.
bool split_http_response(const std::string& block, int* status,
                         std::vector<std::pair<std::string, std::string>>* headers,
                         std::string* body);

}  // namespace mtnlg::curate
