#include "parallel/communicator.h"

#include <algorithm>

#include "parallel/topology.h"

namespace mtnlg {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kMax:
      return "max";
  }
  return "?";
}

ProcessGroups make_process_groups(const Topology& topology, const CommunicatorFactory& make) {
  std::vector<int64_t> all(static_cast<size_t>(topology.sizes().world()));
  for (size_t r = 0; r < all.size(); ++r) all[r] = static_cast<int64_t>(r);
  ProcessGroups g;
  g.world = make("world", static_cast<int>(topology.rank()), all);
  g.tensor = make("tensor", static_cast<int>(topology.tensor_rank()), topology.tensor_group());
  g.data = make("data", static_cast<int>(topology.data_rank()), topology.data_group());
  g.data_grads = make("data-grads", static_cast<int>(topology.data_rank()), topology.data_group());
  g.pipeline =
      make("pipeline", static_cast<int>(topology.pipeline_rank()), topology.pipeline_group());
  const std::vector<int64_t> embedding = topology.embedding_group();
  const auto it = std::find(embedding.begin(), embedding.end(), topology.rank());
  if (it != embedding.end())
    g.embedding = make("embedding", static_cast<int>(it - embedding.begin()), embedding);
  g.checkpoint = make("checkpoint", static_cast<int>(topology.rank()), all);
  return g;
}

void set_compute_stream(ProcessGroups& groups, void* stream) {
  for (auto* g : {&groups.world, &groups.tensor, &groups.data, &groups.pipeline, &groups.embedding,
                  &groups.data_grads, &groups.checkpoint})
    if (*g) (*g)->set_compute_stream(stream);
}

}  // namespace mtnlg
