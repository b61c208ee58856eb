#include "core/metrics.h"

#include <charconv>
#include <cmath>
#include <filesystem>

#include "core/status.h"

namespace mtnlg {

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof(buf), v);
  MTNLG_CHECK(res.ec == std::errc());
  return std::string(buf, res.ptr);
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
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
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
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

MetricsWriter::MetricsWriter(const std::string& path, bool append) : path_(path) {
  const auto parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  out_.open(path, append ? std::ios::app : std::ios::trunc);
  if (!out_)
    throw io_error("cannot open the metrics file for writing; check logging.metrics_file", path);
}

void MetricsWriter::write(const JsonLine& line) {
  out_ << line.str() << '\n';
  out_.flush();
  if (!out_) throw io_error("write failed (disk full?)", path_);
}

}  // namespace mtnlg
