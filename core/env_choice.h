// Two-valued switches read from the environment (MTNLG_CUDA_ATTENTION and the like). One parser
// for every reader, so the backend that runs a choice and the planner that sizes memory for it
// cannot disagree about a value: a misspelling is an error for both, never a silent default.
#pragma once

#include <cstdlib>
#include <cstring>
#include <string>

#include "core/status.h"

namespace mtnlg {

// Whether environment variable `name` selects `on` (the default: unset or empty) rather than
// `off`; any other value is an invalid_argument naming the variable and both values.
inline bool env_choice(const char* name, const char* on, const char* off) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0' || std::strcmp(v, on) == 0) return true;
  if (std::strcmp(v, off) == 0) return false;
  throw invalid_argument(std::string(name) + "=" + v + " is not one of " + on + ", " + off +
                             " (unset it for the default, " + on + ")",
                         name);
}

}  // namespace mtnlg
