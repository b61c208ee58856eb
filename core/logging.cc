#include "core/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>
#include <memory>

#include "core/status.h"

namespace mtnlg {

namespace {

// Colours only for a person at a terminal. mpirun gives each rank a pseudo-terminal even when its
// own output goes to a pipe or a file (`mpirun ... | grep`), so a rank started by a launcher never
// colours; NO_COLOR (no-color.org) turns colours off everywhere.
spdlog::color_mode color_mode() {
  for (const char* var : {"NO_COLOR", "PMIX_RANK", "OMPI_COMM_WORLD_SIZE", "SLURM_STEP_ID"})
    if (std::getenv(var) != nullptr) return spdlog::color_mode::never;
  return spdlog::color_mode::automatic;  // a terminal (isatty) that is not TERM=dumb
}

}  // namespace

void init_logging(const std::string& level, int rank) {
  const auto lvl = spdlog::level::from_str(level);
  if (lvl == spdlog::level::off && level != "off") {
    throw invalid_argument(
        "unknown log level '" + level + "': use trace, debug, info, warn, error or off",
        "--log-level");
  }
  auto sink = std::make_shared<spdlog::sinks::stdout_color_sink_mt>(color_mode());
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("mtnlg", std::move(sink)));
  spdlog::set_level(lvl);
  spdlog::set_pattern("[%Y-%m-%d %H:%M:%S.%e] [rank " + std::to_string(rank) + "] [%^%l%$] %v");
}

void init_logging_to_stderr(const std::string& level) {
  init_logging(level);
  auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>(color_mode());
  auto logger = std::make_shared<spdlog::logger>("mtnlg", std::move(sink));
  logger->set_level(spdlog::get_level());
  spdlog::set_default_logger(std::move(logger));
  spdlog::set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%^%l%$] %v");
}

}  // namespace mtnlg
