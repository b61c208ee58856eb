#include <catch2/catch.hpp>

#include "core/status.h"

using namespace mtnlg;

TEST_CASE("an error reads 'kind [context]: message'") {
  CHECK(std::string(invalid_argument("bad", "model.hidden_size").what()) ==
        "invalid argument [model.hidden_size]: bad");
  CHECK(std::string(corruption("short", "/d/x.idx").what()) == "corruption [/d/x.idx]: short");
  CHECK(std::string(io_error("gone").what()) == "I/O error: gone");
  CHECK(std::string(not_found("no such file", "a.yaml").what()) ==
        "not found [a.yaml]: no such file");
  CHECK(std::string(unsupported("later", "precision").what()) ==
        "not yet supported [precision]: later");
}

TEST_CASE("each code has the README's exit status") {
  CHECK(exit_status(Code::kInvalidArgument) == 2);
  CHECK(exit_status(Code::kUnsupported) == 3);
  CHECK(exit_status(Code::kNotFound) == 4);
  CHECK(exit_status(Code::kCorruption) == 4);
  CHECK(exit_status(Code::kIOError) == 4);
  CHECK(exit_status(Code::kDiverged) == 1);
  CHECK(exit_status(Code::kInternal) == 1);
}

TEST_CASE("user text with control characters stays on one line - escaped, not raw") {
  // A recipe key with a newline in it (found by tests/cmd/fuzz_inputs.py), an ANSI escape in a
  // path: what() escapes them; message() and context() keep the raw text for callers.
  const Error e = invalid_argument("unknown key 'a\nb' \x1b[31mred\t", "model.a\nb");
  CHECK(std::string(e.what()) ==
        "invalid argument [model.a\\nb]: unknown key 'a\\nb' \\x1b[31mred\\t");
  CHECK(e.context() == "model.a\nb");
  CHECK(e.message().find('\n') != std::string::npos);
  // Bytes of UTF-8 text pass through.
  CHECK(std::string(invalid_argument("caf\xc3\xa9").what()) == "invalid argument: caf\xc3\xa9");
}
