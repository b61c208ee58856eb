#include "core/progress.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

namespace mtnlg {

ProgressMode resolve_progress_mode(ProgressMode mode) {
  if (mode != ProgressMode::kAuto) return mode;
  return ::isatty(::fileno(stderr)) ? ProgressMode::kBar : ProgressMode::kLines;
}

std::string format_hms(double seconds) {
  if (!(seconds >= 0) || seconds > 1e7) return "--:--:--";
  const auto s = static_cast<int64_t>(seconds + 0.5);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", static_cast<long long>(s / 3600),
                static_cast<long long>(s / 60 % 60), static_cast<long long>(s % 60));
  return buf;
}

Progress::Progress(ProgressMode mode, std::string label, std::string unit, int64_t total,
                   std::FILE* bar_out)
    : mode_(resolve_progress_mode(mode)),
      label_(std::move(label)),
      unit_(std::move(unit)),
      total_(std::max<int64_t>(total, 0)),
      out_(bar_out),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

Progress::~Progress() {
  if (bar_open_) std::fputc('\n', out_);
}

double Progress::seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void Progress::update(int64_t done) {
  done_ = std::clamp<int64_t>(done, 0, total_);
  if (mode_ == ProgressMode::kBar) {
    const auto now = std::chrono::steady_clock::now();
    if (!bar_open_ || now - last_draw_ >= std::chrono::milliseconds(100)) {
      last_draw_ = now;
      draw_bar(false);
    }
  } else if (mode_ == ProgressMode::kLines) {
    const int64_t tenths = total_ > 0 ? done_ * 10 / total_ : 10;
    if (tenths > logged_tenths_) {
      logged_tenths_ = tenths;
      log_line();
      logged_done_ = done_ == total_;
    }
  }
}

void Progress::finish() {
  done_ = total_;
  if (mode_ == ProgressMode::kBar) {
    draw_bar(true);
    std::fputc('\n', out_);
    std::fflush(out_);
    bar_open_ = false;
  } else if (mode_ == ProgressMode::kLines && !logged_done_) {
    logged_tenths_ = 10;
    log_line();
    logged_done_ = true;
  }
}

void Progress::log_line() {
  const double t = seconds();
  const double rate = t > 0 ? static_cast<double>(done_) / t : 0.0;
  const double eta =
      done_ > 0 ? t * static_cast<double>(total_ - done_) / static_cast<double>(done_) : -1.0;
  spdlog::info(
      "{}: {}/{} {} ({:.0f}%), {:.1f}/s, {} {}", label_, done_, total_, unit_,
      total_ > 0 ? 100.0 * static_cast<double>(done_) / static_cast<double>(total_) : 100.0, rate,
      done_ == total_ ? "took" : "ETA", format_hms(done_ == total_ ? t : eta));
}

void Progress::draw_bar(bool final) {
  constexpr int kWidth = 30;
  const double t = seconds();
  const double frac = total_ > 0 ? static_cast<double>(done_) / static_cast<double>(total_) : 1.0;
  std::string bar(static_cast<size_t>(frac * kWidth), '#');
  bar.resize(kWidth, '.');
  const double eta = done_ > 0 ? t * (1 - frac) / frac : -1.0;
  std::fprintf(out_, "\r%s [%s] %5.1f%% %lld/%lld %s | %.1f/s | %s %s ", label_.c_str(),
               bar.c_str(), 100 * frac, static_cast<long long>(done_),
               static_cast<long long>(total_), unit_.c_str(),
               t > 0 ? static_cast<double>(done_) / t : 0.0, final ? "took" : "ETA",
               format_hms(final ? t : eta).c_str());
  std::fflush(out_);
  bar_open_ = true;
}

}  // namespace mtnlg
