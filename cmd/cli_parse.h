// The command-line parse every executable shares: CLI11's own output for --help, --version and
// mistakes, and the exit statuses docs/training.md gives (0 after --help/--version, 2 for a usage
// error).
#pragma once

#include <CLI/CLI.hpp>

#include <filesystem>
#include <optional>
#include <string>

#include "core/logging.h"
#include "core/status.h"

namespace mtnlg {

// Number checks for options. CLI11's PositiveNumber and NonNegativeNumber print the largest
// double, 309 digits, as their range's end; these say what is wanted in words.
inline CLI::Validator positive_number() {
  return CLI::Validator(
      [](std::string& in) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(in, v)) return "Value " + in + " is not a number";
        if (!(v > 0)) return "Value " + in + " must be positive";
        return std::string();
      },
      "POSITIVE");
}
inline CLI::Validator non_negative_number() {
  return CLI::Validator(
      [](std::string& in) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(in, v)) return "Value " + in + " is not a number";
        if (!(v >= 0)) return "Value " + in + " must be 0 or more";
        return std::string();
      },
      "NONNEGATIVE");
}

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

// Runs body() (which returns the exit status) and turns what it throws into the documented exit
// statuses, logging the message: an Error's code, else 1.
template <typename F>
int exit_status_of(F&& body) {
  try {
    return body();
  } catch (const Error& e) {
    spdlog::error("{}", e.what());
    return exit_status(e.code());
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return 1;
  }
}

// A GPT-2 vocabulary flag's value: as given, else the file shipped in data/gpt2/ when run from
// the repository root, else invalid_argument naming the flag.
inline std::string vocabulary_path(const std::string& given, const char* flag,
                                   const char* shipped) {
  if (!given.empty()) return given;
  if (std::filesystem::exists(shipped)) return shipped;
  throw invalid_argument(std::string(flag) + " is required (no " + shipped +
                         " in the current directory); the fix: pass " + flag +
                         " PATH, e.g. the repository's " + shipped);
}

}  // namespace mtnlg
