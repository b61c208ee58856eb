#include "data/curate/extract_stage.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/metrics.h"
#include "core/status.h"
#include "data/curate/shard_writer.h"
#include "data/curate/staged_file.h"
#include "data/curate/warc_reader.h"
#include "data/unicode_classes.h"

namespace mtnlg::curate {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// The charset parameter of a Content-Type value, or "".
std::string charset_of(const std::string& content_type) {
  const std::string l = lower(content_type);
  const size_t at = l.find("charset=");
  if (at == std::string::npos) return "";
  size_t b = at + 8, e = b;
  if (b < l.size() && (l[b] == '"' || l[b] == '\'')) e = ++b;
  while (e < l.size() && l[e] != ';' && l[e] != '"' && l[e] != '\'' && l[e] != ' ') ++e;
  return content_type.substr(b, e - b);
}

// One unit of work: HTML to run through jusText, or text that passes through.
struct Job {
  std::string url, date, record_id;
  std::string body, charset;
  bool html = true;
  std::string text;  // the result
};

}  // namespace

ExtractStats run_extract(const ExtractOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  ExtractStats stats;
  const std::unordered_set<std::string> stoplist =
      o.stoplist.empty() ? english_stoplist() : read_stoplist(o.stoplist);
  ShardWriter out(o.output);
  int64_t total = 0;
  for (const std::string& in : o.inputs) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(in, ec);
    if (ec) throw not_found("cannot read the input: " + ec.message(), in);
    total += static_cast<int64_t>(size);
  }
  PreprocessProgress progress(o.progress, total, 10000);
  const int threads = o.threads > 0 ? o.threads : omp_get_num_procs();
  std::vector<Job> jobs;
  size_t job_bytes = 0;
  int64_t done_bytes = 0;
  const auto flush = [&] {
    const auto n = static_cast<int64_t>(jobs.size());
#pragma omp parallel for num_threads(threads) schedule(dynamic, 4)
    for (int64_t i = 0; i < n; ++i) {
      Job& j = jobs[static_cast<size_t>(i)];
      if (!j.html) {
        j.text = is_valid_utf8(j.body) ? j.body : replace_invalid_utf8(j.body);
        continue;
      }
      std::string text;
      for (const JustextParagraph& p : justext(decode_html(j.body, j.charset), stoplist, o.justext))
        if (p.class_type == "good") text += (text.empty() ? "" : "\n") + p.text;
      j.text = std::move(text);
    }
    for (const Job& j : jobs) {
      if (j.text.empty()) {
        ++stats.skipped[j.html ? "no good paragraph" : "empty conversion"];
        continue;
      }
      JsonLine line;
      line.add("text", j.text).add("url", j.url);
      if (!j.date.empty()) line.add("date", j.date);
      if (!j.record_id.empty()) line.add("warc_record_id", j.record_id);
      out.write_line(line.str());
      ++stats.documents;
      stats.text_bytes += static_cast<int64_t>(j.text.size());
    }
    jobs.clear();
    job_bytes = 0;
  };
  const auto add = [&](Job j) {
    job_bytes += j.body.size();
    jobs.push_back(std::move(j));
    if (job_bytes >= (size_t{32} << 20)) flush();
  };
  for (const std::string& in : o.inputs) {
    if (ends_with(lower(in), ".warc") || ends_with(lower(in), ".warc.gz")) {
      WarcReader warc(in);
      WarcRecord r;
      while (warc.next(&r)) {
        const std::string type = lower(r.field("WARC-Type"));
        ++stats.records[type.empty() ? "(none)" : type];
        Job j;
        j.url = r.field("WARC-Target-URI");
        j.date = r.field("WARC-Date");
        j.record_id = r.field("WARC-Record-ID");
        if (type == "conversion") {
          j.html = false;
          j.body = std::move(r.block);
          add(std::move(j));
        } else if (type == "response") {
          int status = 0;
          std::vector<std::pair<std::string, std::string>> headers;
          if (!split_http_response(r.block, &status, &headers, &j.body)) {
            ++stats.skipped["not an HTTP response"];
            continue;
          }
          if (status != 200) {
            ++stats.skipped["HTTP status not 200"];
            continue;
          }
          std::string content_type;
          for (const auto& [k, v] : headers)
            if (lower(k) == "content-type") content_type = v;
          const std::string ct = lower(content_type);
          if (!ct.empty() && ct.find("html") == std::string::npos) {
            ++stats.skipped["not HTML"];
            continue;
          }
          j.charset = charset_of(content_type);
          add(std::move(j));
        }
        progress.update(done_bytes + warc.bytes_read(), stats.documents, -1);
      }
      done_bytes += warc.file_size();
    } else if (ends_with(lower(in), ".html") || ends_with(lower(in), ".htm")) {
      std::ifstream f(in, std::ios::binary);
      Job j;
      j.url = in;
      j.body.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
      done_bytes += static_cast<int64_t>(j.body.size());
      add(std::move(j));
      progress.update(done_bytes, stats.documents, -1);
    } else {
      throw invalid_argument(
          "extract reads .warc, .warc.gz, .html and .htm files; the fix: "
          "rename the file to say what it holds",
          in);
    }
  }
  flush();
  progress.finish();
  out.commit();
  stats.input_bytes = total;
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!o.report.empty()) {
    const std::string line = JsonLine()
                                 .add("documents", stats.documents)
                                 .add_raw("warc_records", json_counts(stats.records))
                                 .add_raw("skipped", json_counts(stats.skipped))
                                 .add("input_bytes", stats.input_bytes)
                                 .add("text_bytes", stats.text_bytes)
                                 .str() +
                             "\n";
    write_whole_file(o.report, line);
  }
  return stats;
}

}  // namespace mtnlg::curate
