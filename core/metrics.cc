#include "core/metrics.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iterator>

#include "core/json_scan.h"
#include "core/status.h"
#include "core/utf8.h"

namespace mtnlg {

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof(buf), v);
  MTNLG_CHECK(res.ec == std::errc());
  return std::string(buf, res.ptr);
}

std::string json_counts(const std::map<std::string, int64_t>& counts) {
  std::string s = "{";
  for (const auto& [k, v] : counts)
    s += (s.size() > 1 ? ", " : "") + json_string(k) + ": " + std::to_string(v);
  return s + "}";
}

std::string json_string(const std::string& text) {
  // JSON is UTF-8: what is not well-formed becomes U+FFFD, so the line stays JSON whatever the
  // text held.
  const std::string s = replace_invalid_utf8(text);
  std::string out;
  out.reserve(s.size() + s.size() / 32 + 2);
  out += '"';
  // Runs of bytes that need no escape are appended whole (a document's text is mostly such).
  size_t run = 0;
  for (size_t i = json_plain_run_end(s, 0); i < s.size(); i = json_plain_run_end(s, i + 1)) {
    const auto c = static_cast<unsigned char>(s[i]);
    out.append(s, run, i - run);
    run = i + 1;
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default: {
        char buf[8];
        std::snprintf(buf, sizeof(buf), "\\u%04x", c);
        out += buf;
      }
    }
  }
  out.append(s, run, std::string::npos);
  out += '"';
  return out;
}

void JsonLine::key(const std::string& k) {
  if (!body_.empty()) body_ += ", ";
  body_ += json_string(k) + ": ";
}

JsonLine& JsonLine::add(const std::string& k, double value) {
  key(k);
  body_ += json_number(value);
  return *this;
}

JsonLine& JsonLine::add(const std::string& k, int64_t value) {
  key(k);
  body_ += std::to_string(value);
  return *this;
}

JsonLine& JsonLine::add(const std::string& k, const std::string& value) {
  key(k);
  body_ += json_string(value);
  return *this;
}

JsonLine& JsonLine::add(const std::string& k, bool value) {
  key(k);
  body_ += value ? "true" : "false";
  return *this;
}

JsonLine& JsonLine::add(const std::string& k, uint64_t value) {
  key(k);
  body_ += std::to_string(value);
  return *this;
}

JsonLine& JsonLine::add_raw(const std::string& k, const std::string& json) {
  key(k);
  body_ += json;
  return *this;
}

int64_t truncate_metrics_file(const std::string& path, int64_t last_iteration) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return 0;
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  const std::string key = "{\"iteration\": ";
  size_t keep = 0;  // bytes kept
  int64_t cut = 0;
  bool cutting = false;
  for (size_t pos = 0; pos < text.size();) {
    const size_t nl = text.find('\n', pos);
    const bool torn = nl == std::string::npos;
    const size_t end = torn ? text.size() : nl + 1;
    if (!cutting) {
      int64_t it = -1;
      if (!torn && text.compare(pos, key.size(), key) == 0) {
        it = 0;
        for (size_t i = pos + key.size(); i < end && text[i] >= '0' && text[i] <= '9'; ++i)
          it = it * 10 + (text[i] - '0');
      }
      if (torn || it < 0 || it > last_iteration) cutting = true;
    }
    if (cutting) {
      ++cut;
    } else {
      keep = end;
    }
    pos = end;
  }
  if (cut == 0) return 0;
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(text.data(), static_cast<std::streamsize>(keep));
    out.flush();
    if (!out) throw io_error("cannot rewrite the metrics file (disk full?)", tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw io_error("cannot replace the metrics file: " + ec.message(), path);
  return cut;
}

MetricsWriter::MetricsWriter(const std::string& path, bool append) : path_(path) {
  const auto parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  errno = 0;
  out_.open(path, append ? std::ios::app : std::ios::trunc);
  if (!out_) {
    // The reason (a missing or read-only directory, a name too long), when the OS gave one.
    const int err = errno;
    std::string msg = "cannot open the metrics file for writing";
    if (err != 0) msg += std::string(" (") + std::strerror(err) + ")";
    if (ec) msg += "; its directory could not be created (" + ec.message() + ")";
    throw io_error(msg + "; check logging.metrics_file", path);
  }
}

void MetricsWriter::write(const JsonLine& line) {
  out_ << line.str() << '\n';
  out_.flush();
  if (!out_) throw io_error("write failed (disk full?)", path_);
}

}  // namespace mtnlg
