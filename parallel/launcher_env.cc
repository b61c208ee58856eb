#include "parallel/launcher_env.h"

#include <cstdlib>
#include <stdexcept>
#include <string>

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
  // scripts/launch.sh and other launches through MTNLG_RANK: the runtime's own rule
  // (parallel/runtime.cc): MTNLG_LOCAL_WORLD_SIZE, else every rank on this node.
  if (env("MTNLG_RANK") != nullptr) {
    if (const int n = positive(env("MTNLG_LOCAL_WORLD_SIZE")); n > 0) return n;
    if (const int n = positive(env("MTNLG_WORLD_SIZE")); n > 0) return n;
  }
  if (const char* list = env("SLURM_STEP_TASKS_PER_NODE")) {
    const char* node = env("SLURM_NODEID");
    const int index = node != nullptr && *node == '0' && node[1] == '\0' ? 0 : positive(node);
    if (const int n = slurm_tasks_on_node(list, index); n > 0) return n;
  }
  return 1;
}

}  // namespace mtnlg
