// TCP communicators: the Communicator of parallel/communicator.h over plain TCP sockets, driven
// by the calling thread (no I/O thread), for groups whose ranks are on different nodes.
//
// Why not Gloo's TCP: every Gloo operation goes through its event-loop thread (a wake-up and a
// hand-off per message), which made a 1 KiB all-reduce between two processes 30-60x slower than
// Open MPI's TCP transport here; Gloo's synchronous busy-poll mode serves only bound buffers,
// which its collectives do not use.
//
// Connections: a full mesh, one socket per pair, TCP_NODELAY, non-blocking. Each rank listens
// on an ephemeral port of its host (TcpOptions' iface or hostname choose the address), publishes
// "address:port" in the Store, connects to every lower rank and accepts every higher one; a
// connection starts with the connecting rank's number and the group's nonce, so a stray
// connection is refused.
//
// Algorithms, all on one poll() loop over the sockets of the operation (every send and receive
// of a step in flight at once, so no ordering can deadlock):
//   all_reduce      small (<= 64 KiB): every rank sends its tensor to every other and reduces the
//                   n inputs in rank order; larger: reduce_scatter then all_gather. Either way
//                   every rank gets the same bits.
//   reduce_scatter  chunk k of every rank goes to rank k, which reduces them in rank order
//   all_gather      every rank sends its chunk to every other
//   broadcast       the root sends to every other rank
//   send / recv     a send returns once its bytes are in the kernel's socket buffer
//   barrier         one byte to and from every rank
// Bytes are counted by the bus-bandwidth convention of communicator.h, as every backend counts.
//
// Failures as Gloo's: past the timeout an operation throws io_error naming the group, the
// operation, the peer still pending and the time waited; a peer whose connection closed (its
// process died) is named at once. After a failure the communicator is unusable. Destroying a
// communicator is collective in normal flow (a barrier, so no rank closes a socket a peer still
// sends on); after a failure or while unwinding it closes at once.
//
// Ownership: a communicator owns its sockets. Thread safety: not thread-safe (one thread per
// communicator); the factory is, as long as the Store is.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "parallel/communicator.h"
#include "parallel/store.h"
#include "parallel/transport.h"

namespace mtnlg {

// Collective over the members, like make_gloo_communicator; options: the address to listen on
// and the timeout. The transport factory (parallel/transport.h) calls it.
std::unique_ptr<Communicator> make_tcp_communicator(Store& store, const std::string& group_name,
                                                    int rank_in_group,
                                                    std::vector<int64_t> global_ranks,
                                                    const TcpOptions& options);

}  // namespace mtnlg
