#include "cmd/openmp_policy.h"

#include <unistd.h>

#include <cstdlib>
#include <string>
#include <thread>

namespace mtnlg {

bool oversubscribed(int local_ranks, int threads_per_rank, int cores) {
  // One thread per rank has no OpenMP workers to spin.
  if (local_ranks <= 1 || threads_per_rank <= 1 || cores <= 0) return false;
  return static_cast<long>(local_ranks) * threads_per_rank > cores;
}

void reexec_for_openmp_wait_policy(char** argv, int threads_per_rank) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("MTNLG_OPENMP_REEXEC") != nullptr)
    return;
  const int local = launcher_local_ranks([](const char* k) { return std::getenv(k); });
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  if (!oversubscribed(local, threads_per_rank, cores)) return;
  const std::string why = std::to_string(local) + " ranks x " + std::to_string(threads_per_rank) +
                          " threads on " + std::to_string(cores) + " cores";
  ::setenv("OMP_WAIT_POLICY", "passive", 1);
  ::setenv("MTNLG_OPENMP_REEXEC", why.c_str(), 1);
  // The binary's own path (not /proc/self/exe, which would rename the process "exe" for ps and
  // pgrep).
  char path[4096] = {};
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return;
  ::execv(path, argv);
  // The exec failed (no /proc?): go on with the active policy; the log says why it is slow.
}

}  // namespace mtnlg
