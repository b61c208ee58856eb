#include "core/logging.h"

#include "core/status.h"

namespace mtnlg {

void init_logging(const std::string& level, int rank) {
  const auto lvl = spdlog::level::from_str(level);
  if (lvl == spdlog::level::off && level != "off") {
    throw invalid_argument(
        "unknown log level '" + level + "': use trace, debug, info, warn, error or off",
        "--log-level");
  }
  spdlog::set_level(lvl);
  spdlog::set_pattern("[%Y-%m-%d %H:%M:%S.%e] [rank " + std::to_string(rank) + "] [%^%l%$] %v");
}

}  // namespace mtnlg
