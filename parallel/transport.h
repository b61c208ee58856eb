// The one transport factory: which transport carries each of a rank's process groups, and each
// transport's options, decided here and nowhere else.
//
// CPU groups (every group of a CPU run; the checkpoint group of a GPU run): `transport`
// (parallel.transport, Transport below) picks shared memory (parallel/shm_communicator.h) for a
// group whose ranks share a node and our TCP (parallel/tcp_communicator.h) otherwise (auto), or
// one of them, or Gloo's TCP (parallel/gloo_communicator.h). GPU groups: NCCL on the rank's GPU
// (parallel/cuda/nccl_communicator.h), but for the checkpoint group, whose host messages an
// asynchronous commit sends from a background thread: that one is a CPU group as above, made
// here too (make_nccl_groups calls make_host_communicator for it).
//
// The options a user needs are recipe keys (parallel.transport, parallel.timeout_s); the rest
// are benchmark and site switches read from the environment once, in TransportOptions::resolve:
// MTNLG_TRANSPORT (the older way to choose; wins over the recipe, with a warning),
// MTNLG_SHM_SINGLE_COPY, MTNLG_GLOO_IFACE / GLOO_SOCKET_IFNAME and MTNLG_GLOO_HOSTNAME (the
// address our TCP and Gloo listen on).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/config/recipe.h"
#include "parallel/communicator.h"
#include "parallel/gloo_communicator.h"
#include "parallel/store.h"
#include "parallel/topology.h"

namespace mtnlg {

// auto: shared memory for a group whose ranks share a node, our TCP otherwise; shm: shared
// memory (an error naming the group if a member cannot map it); tcp: always our TCP; gloo: always
// Gloo's TCP. The recipe's parallel.transport.
using Transport = CpuTransport;

// MTNLG_TRANSPORT: auto (also unset or empty), tcp, shm or gloo; anything else is
// invalid_argument naming it.
Transport transport_from_env();

// MTNLG_SHM_SINGLE_COPY=1 (default) or 0: whether shared-memory groups may copy large transfers
// once, from the owner's memory (see shm_communicator.cc); anything else is invalid_argument.
bool single_copy_from_env();

// Each transport's own options.
struct ShmOptions {
  std::chrono::milliseconds timeout = std::chrono::seconds(300);
  bool single_copy = true;
};
struct TcpOptions {
  std::chrono::milliseconds timeout = std::chrono::seconds(300);
  std::string iface;     // network interface to listen on ("eth0"); wins over hostname
  std::string hostname;  // host name or address to listen on; empty: this host's name
};

struct TransportOptions {
  Transport transport = Transport::kAuto;
  // Every rendezvous and operation (the recipe's parallel.timeout_s); NCCL's groups take it too.
  std::chrono::milliseconds timeout = std::chrono::seconds(300);
  ShmOptions shm;
  TcpOptions tcp;
  GlooOptions gloo;

  // `chosen` (the recipe's parallel.transport) and every operation's `timeout`
  // (parallel.timeout_s), with the environment's switches above.
  static TransportOptions resolve(Transport chosen, std::chrono::milliseconds timeout);
};

// One CPU group over options.transport (see Transport). Collective over the members: every
// member calls it with the same name and global_ranks (in group-rank order) and its own rank.
std::unique_ptr<Communicator> make_host_communicator(Store& store, const std::string& group_name,
                                                     int rank_in_group,
                                                     std::vector<int64_t> global_ranks,
                                                     const TransportOptions& options);

// This rank's CPU groups of `topology` (make_process_groups' order), each by
// make_host_communicator. A GPU run's groups: make_nccl_groups (parallel/cuda/), whose
// checkpoint group is make_host_communicator's with the same options.
ProcessGroups make_host_groups(const Topology& topology, Store& store,
                               const TransportOptions& options);

}  // namespace mtnlg
