#include "cmd/openmp_policy.h"

#include <unistd.h>

#include <cstdlib>
#include <string>
#include <thread>

namespace mtnlg {

namespace {

// The count for node `node` in Slurm's compressed list "2(x3),1"; 0 if malformed or absent.
int slurm_tasks_on_node(const std::string& list, int node) {
  size_t pos = 0;
  int index = 0;
  while (pos < list.size()) {
    size_t used = 0;
    int tasks = 0, repeat = 1;
    try {
      tasks = std::stoi(list.substr(pos), &used);
    } catch (const std::exception&) {
      return 0;
    }
    pos += used;
    if (list.compare(pos, 2, "(x") == 0) {
      pos += 2;
      try {
        repeat = std::stoi(list.substr(pos), &used);
      } catch (const std::exception&) {
        return 0;
      }
      pos += used;
      if (pos >= list.size() || list[pos] != ')') return 0;
      ++pos;
    }
    if (node < index + repeat) return tasks;
    index += repeat;
    if (pos < list.size() && list[pos] != ',') return 0;
    ++pos;
  }
  return 0;
}

int positive(const char* v) {
  if (v == nullptr) return 0;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  return end != v && *end == '\0' && x > 0 && x < 1 << 20 ? static_cast<int>(x) : 0;
}

}  // namespace

int launcher_local_ranks(const EnvLookup& env) {
  if (const int n = positive(env("OMPI_COMM_WORLD_LOCAL_SIZE")); n > 0) return n;
  if (const char* list = env("SLURM_STEP_TASKS_PER_NODE")) {
    const char* node = env("SLURM_NODEID");
    const int index = node != nullptr && *node == '0' && node[1] == '\0' ? 0 : positive(node);
    if (const int n = slurm_tasks_on_node(list, index); n > 0) return n;
  }
  return 1;
}

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
