// Memory-mapped inputs that change under the program: a dataset's .bin or .idx, or a safetensors
// file, truncated or rewritten while it is mapped makes the next read of a vanished page raise
// SIGBUS, which would kill the run with no message (exit 135). Every mapping of an input is
// registered here; a SIGBUS inside one prints which file changed and the fix, and exits 4 (a
// corrupt input), like any other bad file.
//
// The table is process-wide state a signal handler must reach (as the stop flag): fixed-size,
// filled under a mutex, read lock-free by the handler.
#pragma once

#include <cstddef>
#include <string>

namespace mtnlg {

// Registers [begin, begin + bytes) as a mapping of `path` (installs the SIGBUS handler once).
void register_mapped_input(const void* begin, size_t bytes, const std::string& path);
// Forgets the mapping starting at `begin` (before it is unmapped).
void unregister_mapped_input(const void* begin);

}  // namespace mtnlg
