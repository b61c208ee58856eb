#include "data/curate/warc_reader.h"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "core/status.h"

namespace mtnlg::curate {

namespace {

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t' || s[e - 1] == '\r')) --e;
  return std::string(s.substr(b, e - b));
}

}  // namespace

std::string WarcRecord::field(const std::string& name) const {
  for (const auto& [k, v] : fields)
    if (iequals(k, name)) return v;
  return "";
}

bool WarcReader::next(WarcRecord* record) {
  std::string line;
  // Blank lines between records (the CRLF CRLF after a block) are skipped.
  do {
    if (!reader_.next(&line)) return false;
  } while (line.empty());
  ++records_;
  const std::string where = reader_.path() + ": record " + std::to_string(records_) + " (line " +
                            std::to_string(reader_.line_number()) + ")";
  if (line.rfind("WARC/", 0) != 0)
    throw corruption("expected a WARC version line, found '" + line.substr(0, 40) +
                         "': the previous record's Content-Length is wrong, or this is not a WARC "
                         "file; the fix: repair or re-fetch the file",
                     where);
  record->number = records_;
  record->fields.clear();
  while (true) {
    if (!reader_.next(&line)) throw corruption("the file ends inside a record's header", where);
    if (line.empty()) break;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;  // a continuation or a malformed field: ignored
    record->fields.emplace_back(trim(line.substr(0, colon)), trim(line.substr(colon + 1)));
  }
  const std::string length = record->field("Content-Length");
  int64_t n = -1;
  const auto res = std::from_chars(length.data(), length.data() + length.size(), n);
  if (length.empty() || res.ec != std::errc() || res.ptr != length.data() + length.size() || n < 0)
    throw corruption("no valid Content-Length ('" + length + "'); the fix: repair the record",
                     where);
  if (!reader_.read_exact(static_cast<size_t>(n), &record->block))
    throw corruption("the file ends inside the record's block (Content-Length " + length + ", " +
                         std::to_string(record->block.size()) + " bytes left)",
                     where);
  return true;
}

bool split_http_response(const std::string& block, int* status,
                         std::vector<std::pair<std::string, std::string>>* headers,
                         std::string* body) {
  if (block.rfind("HTTP/", 0) != 0) return false;
  size_t end = block.find("\r\n\r\n");
  size_t skip = 4;
  if (end == std::string::npos) {
    end = block.find("\n\n");
    skip = 2;
  }
  if (end == std::string::npos) {
    end = block.size();
    skip = 0;
  }
  headers->clear();
  size_t at = 0;
  bool first = true;
  while (at < end) {
    size_t nl = block.find('\n', at);
    if (nl == std::string::npos || nl > end) nl = end;
    const std::string_view line(block.data() + at, nl - at);
    if (first) {
      const size_t sp = line.find(' ');
      *status = 0;
      if (sp != std::string_view::npos)
        std::from_chars(line.data() + sp + 1, line.data() + line.size(), *status);
      first = false;
    } else {
      const size_t colon = line.find(':');
      if (colon != std::string_view::npos)
        headers->emplace_back(trim(line.substr(0, colon)), trim(line.substr(colon + 1)));
    }
    at = nl + 1;
  }
  body->assign(block, std::min(block.size(), end + skip), std::string::npos);
  return true;
}

}  // namespace mtnlg::curate
