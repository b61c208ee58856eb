#include "parallel/group_checks.h"

namespace mtnlg {

std::string ranks_str(const std::vector<int64_t>& ranks) {
  std::string s = "[";
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(ranks[i]);
  }
  return s + "]";
}

std::string group_where(const std::string& name, int rank, int size,
                        const std::vector<int64_t>& global_ranks, const std::string& detail) {
  return "group '" + name + "' (rank " + std::to_string(rank) + " of " + std::to_string(size) +
         ", global ranks " + ranks_str(global_ranks) + detail + ")";
}

std::string peer_str(int peer, const std::vector<int64_t>& global_ranks) {
  return "peer rank " + std::to_string(peer) + " (global rank " +
         std::to_string(global_ranks[static_cast<size_t>(peer)]) + ")";
}

}  // namespace mtnlg
