// Metrics: one JSON object per line (JSON Lines), the machine-readable record of a run.
//
// JsonLine builds one object; numbers are written as the shortest decimal that round-trips to
// the same double (std::to_chars), never rounded to a few digits, so scripts can compare runs
// bit for bit. MetricsWriter appends lines to a file, creating its directory, and flushes each
// line so a crash loses nothing already logged. Not thread-safe.
#pragma once

#include <cstdint>
#include <fstream>
#include <map>
#include <string>

namespace mtnlg {

class JsonLine {
 public:
  JsonLine& add(const std::string& key, double value);
  JsonLine& add(const std::string& key, int64_t value);
  JsonLine& add(const std::string& key, const std::string& value);
  JsonLine& add(const std::string& key, const char* value) { return add(key, std::string(value)); }
  JsonLine& add(const std::string& key, bool value);
  JsonLine& add(const std::string& key, uint64_t value);
  // `json` is already JSON text (a nested object or array).
  JsonLine& add_raw(const std::string& key, const std::string& json);
  std::string str() const { return "{" + body_ + "}"; }

 private:
  void key(const std::string& k);
  std::string body_;
};

// Shortest round-trip decimal of v; non-finite values become null (JSON has no NaN).
std::string json_number(double v);
std::string json_string(const std::string& s);
// {"name": count, ...} in the map's order.
std::string json_counts(const std::map<std::string, int64_t>& counts);

// A resumed run's metrics file reads as one run: keeps the lines up to and including iteration
// `last_iteration` and cuts the rest (lines of work lost after that checkpoint, and a line torn by
// a kill: no newline, or no leading "iteration"). Rewrites the file atomically; a missing file is
// left missing. Returns the number of lines cut.
int64_t truncate_metrics_file(const std::string& path, int64_t last_iteration);

class MetricsWriter {
 public:
  // append=false truncates an existing file (a fresh run); true continues it (a resumed run).
  MetricsWriter(const std::string& path, bool append);
  void write(const JsonLine& line);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::ofstream out_;
};

}  // namespace mtnlg
