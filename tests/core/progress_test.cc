// Progress (core/progress.h): a bar redrawn in place for a terminal, a log line each tenth of the
// way for logs, nothing for a rank that does not report.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>

#include "core/progress.h"
#include "tests/log_capture.h"

using namespace mtnlg;
using mtnlg::test::LogCapture;

namespace {

int count_of(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// What was written to `f`.
std::string contents(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string out;
  for (int c; (c = std::fgetc(f)) != EOF;) out.push_back(static_cast<char>(c));
  return out;
}

}  // namespace

TEST_CASE("progress in lines logs each tenth of the way once - and the end once") {
  LogCapture log;
  {
    Progress p(ProgressMode::kLines, "piqa", "request groups", 200);
    for (int done = 1; done <= 200; ++done) p.update(done);
    p.finish();  // the line at 200 was logged by update
  }
  const std::string text = log.text();
  CHECK(count_of(text, "piqa: ") == 10);
  CHECK(count_of(text, "piqa: 20/200 request groups (10%)") == 1);
  CHECK(count_of(text, "piqa: 200/200 request groups (100%)") == 1);
  CHECK(count_of(text, "took") == 1);
  CHECK(count_of(text, "ETA") == 9);
}

TEST_CASE("progress in lines logs the end at finish when the updates stopped short") {
  LogCapture log;
  Progress p(ProgressMode::kLines, "loss", "samples", 1000);
  p.update(5);  // under a tenth: nothing yet
  CHECK(log.text().empty());
  p.finish();
  CHECK_THAT(log.text(), Catch::StartsWith("loss: 1000/1000 samples (100%), "));
  CHECK(count_of(log.text(), "took") == 1);
}

TEST_CASE("progress as a bar redraws one line in place and ends it") {
  std::FILE* f = std::tmpfile();
  REQUIRE(f != nullptr);
  {
    Progress p(ProgressMode::kBar, "hellaswag", "request groups", 4, f);
    p.update(1);  // the first update draws at once
    p.update(2);  // within 100 ms of it: not drawn (unless this thread stalled that long)
    p.finish();
  }
  const std::string text = contents(f);
  std::fclose(f);
  CHECK(count_of(text, "\n") == 1);  // one line, ended once (not again by the destructor)
  CHECK(text.back() == '\n');
  // The first draw and the final one; a third only where the machine stalled between the
  // updates (the throttle is by the clock: no exact count that a loaded machine could break).
  CHECK(count_of(text, "\r") >= 2);
  CHECK(count_of(text, "\r") <= 3);
  CHECK(text.find("\rhellaswag [#######.......................]  25.0% 1/4 request groups") !=
        std::string::npos);
  CHECK(text.find("[##############################] 100.0% 4/4 request groups") !=
        std::string::npos);
  CHECK(text.find("took") != std::string::npos);
}

TEST_CASE("a bar left open by an exception is ended - nothing drawn without a terminal's mode") {
  std::FILE* f = std::tmpfile();
  REQUIRE(f != nullptr);
  try {
    Progress p(ProgressMode::kBar, "race", "request groups", 10, f);
    p.update(3);
    throw std::runtime_error("a bad document");
  } catch (const std::runtime_error&) {
  }
  const std::string text = contents(f);
  std::fclose(f);
  CHECK(text.find("3/10") != std::string::npos);
  CHECK(text.back() == '\n');

  LogCapture log;
  Progress none(ProgressMode::kNone, "x", "samples", 3);
  none.update(3);
  none.finish();
  CHECK(log.text().empty());
}

TEST_CASE("format_hms writes hours minutes and seconds - dashes while unknown") {
  CHECK(format_hms(0) == "0:00:00");
  CHECK(format_hms(3725.4) == "1:02:05");
  CHECK(format_hms(-1) == "--:--:--");
  CHECK(format_hms(std::nan("")) == "--:--:--");
}
