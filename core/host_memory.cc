#include "core/host_memory.h"

#include <fmt/format.h>

#include <fstream>
#include <limits>
#include <sstream>
#include <vector>

#include "core/status.h"

namespace mtnlg {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  if (!in) return {};
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

// The value of "Key:   123 kB" in /proc/meminfo, in bytes; -1 when absent.
int64_t meminfo_bytes(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) != 0) continue;
    std::istringstream fields(line.substr(key.size() + 1));
    int64_t value = -1;
    std::string unit;
    if (!(fields >> value)) return -1;
    fields >> unit;
    return unit == "kB" ? value * 1024 : value;
  }
  return -1;
}

// A cgroup file's number; -1 when empty, "max" or not a number.
int64_t cgroup_number(const std::string& text) {
  std::istringstream in(text);
  int64_t value = -1;
  if (!(in >> value) || value < 0) return -1;
  return value;
}

// The memory cgroup's directory: v2 ("0::/path") or v1 ("N:memory:/path") from
// /proc/self/cgroup, under the mount; a namespaced mount shows its own cgroup at the root.
std::vector<std::string> cgroup_dirs() {
  std::vector<std::string> dirs;
  std::istringstream in(slurp("/proc/self/cgroup"));
  std::string line;
  while (std::getline(in, line)) {
    const auto first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    if (controllers.empty()) {
      dirs.push_back("/sys/fs/cgroup" + path);
      dirs.push_back("/sys/fs/cgroup");
    } else if (controllers.find("memory") != std::string::npos) {
      dirs.push_back("/sys/fs/cgroup/memory" + path);
      dirs.push_back("/sys/fs/cgroup/memory");
    }
  }
  return dirs;
}

}  // namespace

HostMemory host_memory_from(const std::string& meminfo, const std::string& cgroup_limit,
                            const std::string& cgroup_usage) {
  HostMemory out;
  const int64_t available = meminfo_bytes(meminfo, "MemAvailable");
  if (available >= 0) {
    const int64_t swap = std::max<int64_t>(0, meminfo_bytes(meminfo, "SwapFree"));
    out.available = available + swap;
    out.source = "MemAvailable + SwapFree in /proc/meminfo";
  }
  // Limits within 1 TiB of 2^63 are v1's way of saying "none".
  const int64_t limit = cgroup_number(cgroup_limit);
  if (limit >= 0 && limit < std::numeric_limits<int64_t>::max() - (int64_t{1} << 40)) {
    const int64_t left =
        std::max<int64_t>(0, limit - std::max<int64_t>(0, cgroup_number(cgroup_usage)));
    if (out.available < 0 || left < out.available) {
      out.available = left;
      out.source = "the memory cgroup's limit less its usage";
    }
  }
  return out;
}

HostMemory host_memory_available() {
  const std::string meminfo = slurp("/proc/meminfo");
  for (const std::string& dir : cgroup_dirs()) {
    for (const auto& [limit, usage] :
         {std::pair<const char*, const char*>{"memory.max", "memory.current"},
          {"memory.limit_in_bytes", "memory.usage_in_bytes"}}) {
      const std::string limit_text = slurp(dir + "/" + limit);
      if (!limit_text.empty())
        return host_memory_from(meminfo, limit_text, slurp(dir + "/" + usage));
    }
  }
  return host_memory_from(meminfo, "", "");
}

void check_can_allocate(int64_t bytes, const std::string& what) {
  if (bytes < (int64_t{64} << 20)) return;
  const HostMemory host = host_memory_available();
  if (host.available < 0 || bytes <= host.available) return;
  throw invalid_argument(
      fmt::format("not enough memory for {}: it needs {:.2f} GiB ({} bytes) but the node has "
                  "{:.2f} GiB available ({})",
                  what, static_cast<double>(bytes) / (1LL << 30), bytes,
                  static_cast<double>(host.available) / (1LL << 30), host.source),
      "memory");
}

}  // namespace mtnlg
