// `mtnlg-curate extract`: raw web data to text records {"text", "url", ...}:
//   .warc, .warc.gz  each "response" record holding an HTTP 200 response with an HTML body
//                    (Content-Type text/html or application/xhtml+xml, or no type and markup)
//                    goes through jusText (data/curate/justext.h) with the charset of its
//                    Content-Type header, then of its <meta> tag; each "conversion" record (WET:
//                    text already extracted) passes through as it is; other records are counted
//                    and skipped. Records carry "url" (WARC-Target-URI), "date" (WARC-Date) and
//                    "warc_record_id".
//   .html, .htm      one document per file, "url" the file's path.
// A document is the text of jusText's good paragraphs, one a line; one without any is dropped
// and counted. Output as every stage's: staged and renamed, compressed as named.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_set>
#include <vector>

#include "data/curate/justext.h"
#include "data/preprocess_progress.h"

namespace mtnlg::curate {

struct ExtractOptions {
  std::vector<std::string> inputs;
  std::string output, report;
  std::string stoplist;  // a file, or "" for the shipped English list
  JustextOptions justext;
  int threads = 0;
  ProgressMode progress = ProgressMode::kAuto;
};

struct ExtractStats {
  int64_t documents = 0;
  std::map<std::string, int64_t> records;  // WARC records by type
  std::map<std::string, int64_t> skipped;  // by reason
  int64_t input_bytes = 0, text_bytes = 0;
  double seconds = 0;
};

ExtractStats run_extract(const ExtractOptions& o);

}  // namespace mtnlg::curate
