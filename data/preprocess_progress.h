// PreprocessProgress: what mtnlg-preprocess tells the user while it runs. On a terminal, a
// progress bar redrawn in place (documents/s, MB/s, ETA from the input size); otherwise, for
// logs, one plain line every `log_interval` documents. Both go to stderr.
//
// Owned by the preprocessing run; called from its writer thread only (not thread-safe).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "core/progress.h"  // ProgressMode

namespace mtnlg {

class PreprocessProgress {
 public:
  PreprocessProgress(ProgressMode mode, int64_t total_bytes, int64_t log_interval);

  // Totals so far: input bytes consumed, documents and tokens written (tokens < 0: a stage
  // without tokens; the lines leave them out).
  void update(int64_t bytes, int64_t documents, int64_t tokens);
  // Ends the bar's line (the final summary is the caller's).
  void finish();

  double seconds() const;

 private:
  void draw_bar(bool final);

  ProgressMode mode_;
  int64_t total_bytes_;
  int64_t log_interval_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
  int64_t bytes_ = 0, documents_ = 0, tokens_ = 0;
  int64_t next_line_at_ = 0;  // documents
  bool drawn_ = false;
};

}  // namespace mtnlg
