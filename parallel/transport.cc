#include "parallel/transport.h"

#include <cstdlib>
#include <cstring>

#include "core/logging.h"
#include "core/status.h"
#include "parallel/group_checks.h"
#include "parallel/shm_communicator.h"
#include "parallel/tcp_communicator.h"

namespace mtnlg {

Transport transport_from_env() {
  const char* v = std::getenv("MTNLG_TRANSPORT");
  if (v == nullptr || *v == '\0' || std::strcmp(v, "auto") == 0) return Transport::kAuto;
  if (std::strcmp(v, "tcp") == 0) return Transport::kTcp;
  if (std::strcmp(v, "shm") == 0) return Transport::kShm;
  if (std::strcmp(v, "gloo") == 0) return Transport::kGloo;
  throw invalid_argument(std::string("MTNLG_TRANSPORT=") + v +
                             " is not a transport; the fix: auto (shared memory within a node, "
                             "TCP across nodes), tcp, gloo or shm",
                         "MTNLG_TRANSPORT");
}

bool single_copy_from_env() {
  const char* v = std::getenv("MTNLG_SHM_SINGLE_COPY");
  if (v == nullptr || *v == '\0' || std::strcmp(v, "1") == 0) return true;
  if (std::strcmp(v, "0") == 0) return false;
  throw invalid_argument(std::string("MTNLG_SHM_SINGLE_COPY=") + v +
                             " is not 0 or 1; the fix: 1 (the default: large transfers copy once, "
                             "where the kernel allows) or 0 (always through the segment)",
                         "MTNLG_SHM_SINGLE_COPY");
}

TransportOptions TransportOptions::resolve(Transport chosen, std::chrono::milliseconds timeout) {
  TransportOptions o;
  o.transport = chosen;
  o.timeout = timeout;
  // The environment's switch, when set, wins (the older way to choose; kept).
  const char* env = std::getenv("MTNLG_TRANSPORT");
  if (env != nullptr && *env != '\0') {
    o.transport = transport_from_env();
    if (chosen != Transport::kAuto && o.transport != chosen)
      spdlog::warn("MTNLG_TRANSPORT={} overrides parallel.transport: {}", env,
                   cpu_transport_name(chosen));
  }
  o.gloo = GlooOptions::from_env(timeout);
  o.tcp = TcpOptions{timeout, o.gloo.iface, o.gloo.hostname};
  o.shm = ShmOptions{timeout, single_copy_from_env()};
  return o;
}

std::unique_ptr<Communicator> make_host_communicator(Store& store, const std::string& group_name,
                                                     int rank_in_group,
                                                     std::vector<int64_t> global_ranks,
                                                     const TransportOptions& options) {
  const Transport t = options.transport;
  if (global_ranks.size() > 1 && (t == Transport::kAuto || t == Transport::kShm)) {
    auto shm =
        try_make_shm_communicator(store, group_name, rank_in_group, global_ranks, options.shm);
    if (shm) return shm;
    if (t == Transport::kShm)
      throw io_error("group '" + group_name + "' (global ranks " + ranks_str(global_ranks) +
                         "): a member could not map the shared-memory segment (ranks on "
                         "different nodes, or /dev/shm full or not shared); the fix: "
                         "parallel.transport auto or tcp",
                     "parallel.transport");
  }
  if (t == Transport::kGloo)
    return make_gloo_communicator(store, group_name, rank_in_group, std::move(global_ranks),
                                  options.gloo);
  return make_tcp_communicator(store, group_name, rank_in_group, std::move(global_ranks),
                               options.tcp);
}

ProcessGroups make_host_groups(const Topology& topology, Store& store,
                               const TransportOptions& options) {
  return make_process_groups(
      topology, [&](const std::string& name, int rank, std::vector<int64_t> ranks) {
        return make_host_communicator(store, name, rank, std::move(ranks), options);
      });
}

}  // namespace mtnlg
