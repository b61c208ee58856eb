// What long work tells the user while it runs, on stderr: on a terminal a bar redrawn in place
// (at most ten times a second), otherwise, for logs, plain lines. ProgressMode is every command's
// choice (--no-progress-bar: lines even on a terminal); Progress counts work toward a known total
// (mtnlg-eval's request groups and samples); data/preprocess_progress.h draws the corpus tools'
// bar from bytes read.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace mtnlg {

// kAuto: kBar when stderr is a terminal, else kLines. kNone: nothing (a rank that does not report).
enum class ProgressMode { kAuto, kBar, kLines, kNone };

// kAuto decided for this process's stderr; the other modes as they are.
ProgressMode resolve_progress_mode(ProgressMode mode);

// "H:MM:SS"; "--:--:--" for a negative, NaN or absurd value (an ETA not known yet).
std::string format_hms(double seconds);

// `total` units of work named `unit` ("request groups"), under `label` ("piqa"). The bar:
// "label [#####.....]  48.0% 1200/2500 request groups | 35.2/s | ETA 0:00:37"; the lines, through
// the logger: "label: 1200/2500 request groups (48%), 35.2/s, ETA 0:00:37", one each tenth of the
// way and one at the end. Not thread-safe: one caller.
class Progress {
 public:
  // `bar_out`: where the bar is drawn (stderr; a test passes a file).
  Progress(ProgressMode mode, std::string label, std::string unit, int64_t total,
           std::FILE* bar_out = stderr);
  // Ends a bar left drawn (an exception unwinding through the work), so the next line starts
  // at the margin.
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Units done so far (at most total; more is taken as total).
  void update(int64_t done);
  // The final state: the bar drawn full with the time taken and its line ended; in lines mode
  // the last line, unless update() logged it already.
  void finish();

  ProgressMode mode() const { return mode_; }

 private:
  double seconds() const;
  void draw_bar(bool final);
  void log_line();

  ProgressMode mode_;
  std::string label_, unit_;
  int64_t total_;
  std::FILE* out_;
  int64_t done_ = 0;
  int64_t logged_tenths_ = 0;  // lines mode: tenths of the way logged so far
  bool logged_done_ = false;   // lines mode: the line at the total was logged
  bool bar_open_ = false;      // a bar is drawn and its line not ended
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace mtnlg
