// Products of user-given counts (tokens = iterations x batch x sequence, samples = evaluations x
// iterations x batch, ...) computed with an overflow check: a product past 64 bits is an error
// naming the keys it came from, never a wrapped negative number that passes validation.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace mtnlg {

// a * b, or invalid_argument "KEYS: A x B overflows 64-bit integers; lower one of them" with
// context `key` (the key a user most likely mistyped).
inline int64_t checked_mul(int64_t a, int64_t b, const std::string& keys, const std::string& key) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out))
    throw invalid_argument(keys + ": " + std::to_string(a) + " x " + std::to_string(b) +
                               " overflows 64-bit integers; lower one of them",
                           key);
  return out;
}

}  // namespace mtnlg
