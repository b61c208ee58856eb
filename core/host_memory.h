// How much memory this process can still take on its node, before the kernel's OOM killer ends
// it. With overcommit a too-large allocation does not fail (no std::bad_alloc): the pages are
// touched one by one until the process is SIGKILLed, minutes later, with no message. So the
// trainer compares its plan with this figure before it allocates.
#pragma once

#include <cstdint>
#include <string>

namespace mtnlg {

struct HostMemory {
  int64_t available = -1;  // bytes; -1: unknown (no /proc/meminfo)
  std::string source;      // where the figure comes from, for messages
};

// min(MemAvailable + SwapFree from /proc/meminfo, the memory cgroup's limit less its usage)
// (cgroup v2 memory.max / memory.current, or v1 memory.limit_in_bytes / memory.usage_in_bytes;
// "max" or a limit near 2^63 is no limit).
HostMemory host_memory_available();

// Throws invalid_argument, context "memory", when `bytes` is more than this node has available:
// "not enough memory for WHAT: ..." with both figures. For allocations sized by user input that
// are touched at once (a data index of the whole run); callers add the key that sized them.
// Allocations under 64 MiB are not checked.
void check_can_allocate(int64_t bytes, const std::string& what);

// The figures parsed from the files' text, for tests. meminfo: /proc/meminfo's text; limit and
// usage: the cgroup files' text ("" when absent).
HostMemory host_memory_from(const std::string& meminfo, const std::string& cgroup_limit,
                            const std::string& cgroup_usage);

}  // namespace mtnlg
