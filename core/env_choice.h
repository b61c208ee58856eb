// Switches read from the environment (MTNLG_CUDA_ATTENTION and the like). One parser
// for every reader, so the backend that runs a choice and the planner that sizes memory for it
// cannot disagree about a value: a misspelling is an error for both, never a silent default.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>

#include "core/status.h"

namespace mtnlg {

// Which of `values` environment variable `name` selects: its index, 0 (the default) when unset
// or empty; any other value is an invalid_argument naming the variable and the values.
inline size_t env_select(const char* name, std::initializer_list<const char*> values) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return 0;
  size_t i = 0;
  std::string listed;
  for (const char* value : values) {
    if (std::strcmp(v, value) == 0) return i;
    listed += (i++ ? ", " : "") + std::string(value);
  }
  throw invalid_argument(std::string(name) + "=" + v + " is not one of " + listed +
                             " (unset it for the default, " + *values.begin() + ")",
                         name);
}

// Whether environment variable `name` selects `on` (the default: unset or empty) rather than
// `off`, as env_select.
inline bool env_choice(const char* name, const char* on, const char* off) {
  return env_select(name, {on, off}) == 0;
}

}  // namespace mtnlg
