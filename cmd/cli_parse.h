// The command-line parse every executable shares: CLI11's own output for --help, --version and
// mistakes, and the exit statuses the README gives (0 after --help/--version, 2 for a usage error).
#pragma once

#include <CLI/CLI.hpp>

#include <optional>

namespace mtnlg {

// Parses argv into `app`; the status to exit with now, or nullopt to go on.
inline std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int printed = app.exit(e);  // prints help, version or the mistake
    return printed == 0 ? 0 : 2;
  }
  return std::nullopt;
}

}  // namespace mtnlg
