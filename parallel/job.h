// Job: one rank's set-up of a parallel job, as a command that starts ranks does it. It holds the
// launcher's runtime (parallel/runtime.h), the topology the requested tensor and pipeline sizes
// make of the world (a requested data size, when given, checked against it), and the rank's
// communication groups, which the caller's factory makes (it knows the device: NCCL for GPU
// ranks, a CPU transport otherwise); once made, the groups' transports are logged and a tensor
// group spanning nodes is warned about.
//
// Ownership: the Job owns the runtime (and so its store) and the groups; it must outlive every
// user of the groups. Move-only; used from one thread.
#pragma once

#include <cstdint>
#include <functional>

#include "parallel/communicator.h"
#include "parallel/runtime.h"
#include "parallel/topology.h"

namespace mtnlg {

class Job {
 public:
  // tensor, pipeline: the sizes asked for; data: the data-parallel size asked for (0: what the
  // world leaves). Throws invalid_argument naming `data_key` when the world is not tensor x
  // pipeline x data, and Topology::derive's errors when it does not divide. Logs the runtime
  // and the topology when there is more than one rank.
  Job(Runtime runtime, int64_t tensor, int64_t pipeline, int64_t data,
      const char* data_key = "parallel.data");

  using GroupFactory = std::function<ProcessGroups(const Topology&, Store&)>;
  // With more than one rank: this rank's groups from `make`, then which transport each got
  // (logged) and whether the tensor group spans nodes (warned about on its first rank; it
  // gathers the node ids over the tensor group). With one rank: nothing.
  void connect(const GroupFactory& make);

  const Runtime& runtime() const { return runtime_; }
  const Topology& topology() const { return topology_; }
  ProcessGroups& groups() { return groups_; }
  bool multi_rank() const { return runtime_.world > 1; }

 private:
  Runtime runtime_;
  Topology topology_;
  ProcessGroups groups_;
};

}  // namespace mtnlg
