#include "data/preprocess_progress.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>

namespace mtnlg {

PreprocessProgress::PreprocessProgress(ProgressMode mode, int64_t total_bytes, int64_t log_interval)
    : mode_(mode),
      total_bytes_(total_bytes),
      log_interval_(log_interval > 0 ? log_interval : 1),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {
  mode_ = resolve_progress_mode(mode_);
  next_line_at_ = log_interval_;
}

double PreprocessProgress::seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void PreprocessProgress::update(int64_t bytes, int64_t documents, int64_t tokens) {
  bytes_ = bytes;
  documents_ = documents;
  tokens_ = tokens;
  if (mode_ == ProgressMode::kBar) {
    const auto now = std::chrono::steady_clock::now();
    if (!drawn_ || now - last_draw_ >= std::chrono::milliseconds(100)) {
      last_draw_ = now;
      draw_bar(false);
    }
  } else if (mode_ == ProgressMode::kLines && documents_ >= next_line_at_) {
    const double t = seconds();
    spdlog::info("processed {} documents{}, {:.1f}/{:.1f} MB, {:.0f} docs/s, {:.2f} MB/s, ETA {}",
                 documents_,
                 tokens_ >= 0 ? " (" + std::to_string(tokens_) + " tokens)" : std::string(),
                 bytes_ / 1e6, total_bytes_ / 1e6, documents_ / t, bytes_ / 1e6 / t,
                 format_hms(bytes_ > 0 ? t * double(total_bytes_ - bytes_) / double(bytes_) : -1));
    while (next_line_at_ <= documents_) next_line_at_ += log_interval_;
  }
}

void PreprocessProgress::draw_bar(bool final) {
  constexpr int kWidth = 30;
  const double t = seconds();
  const double frac = total_bytes_ > 0 ? std::min(1.0, double(bytes_) / double(total_bytes_)) : 1;
  const int filled = static_cast<int>(frac * kWidth);
  std::string bar(filled, '#');
  bar.resize(kWidth, '.');
  const double eta = final ? 0 : (bytes_ > 0 ? t * (1 - frac) / frac : -1);
  std::fprintf(stderr, "\r[%s] %5.1f%% %.1f/%.1f MB | %lld docs %.0f docs/s | %.2f MB/s | %s %s ",
               bar.c_str(), 100 * frac, bytes_ / 1e6, total_bytes_ / 1e6,
               static_cast<long long>(documents_), t > 0 ? documents_ / t : 0.0,
               t > 0 ? bytes_ / 1e6 / t : 0.0, final ? "took" : "ETA",
               format_hms(final ? t : eta).c_str());
  std::fflush(stderr);
  drawn_ = true;
}

void PreprocessProgress::finish() {
  if (mode_ == ProgressMode::kBar) {
    draw_bar(true);
    std::fputc('\n', stderr);
  }
}

}  // namespace mtnlg
