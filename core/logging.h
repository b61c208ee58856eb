// Logging: spdlog's default logger is the one global of the program. init_logging() sets its
// level and a pattern carrying the rank (single process: rank 0) so multi-rank logs interleave
// readably.
#pragma once

#include <spdlog/spdlog.h>

#include <string>

namespace mtnlg {

// level: trace, debug, info, warn, error. Throws invalid_argument for another name.
void init_logging(const std::string& level, int rank = 0);
// The same logger writing to stderr: for programs whose stdout is their results (the benchmarks'
// --json lines), so that a library's log line can never land among them.
void init_logging_to_stderr(const std::string& level);

}  // namespace mtnlg
