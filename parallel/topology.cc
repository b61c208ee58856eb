#include "parallel/topology.h"

#include <algorithm>

#include "core/status.h"

namespace mtnlg {

Topology::Topology(ParallelSizes sizes, int64_t rank) : sizes_(sizes), rank_(rank) {
  if (sizes_.tensor < 1 || sizes_.pipeline < 1 || sizes_.data < 1)
    throw invalid_argument("parallel sizes must be >= 1", "parallel");
  MTNLG_CHECK_MSG(0 <= rank_ && rank_ < sizes_.world(),
                  "rank " << rank_ << " outside world " << sizes_.world());
}

ParallelSizes Topology::derive(int64_t world, int64_t tensor, int64_t pipeline) {
  if (world % (tensor * pipeline) != 0) {
    throw invalid_argument("world size " + std::to_string(world) +
                               " is not a multiple of parallel.tensor x parallel.pipeline = " +
                               std::to_string(tensor) + " x " + std::to_string(pipeline) +
                               ": launch a multiple of " + std::to_string(tensor * pipeline) +
                               " ranks or change the layout",
                           "parallel");
  }
  return ParallelSizes{tensor, pipeline, world / (tensor * pipeline)};
}

int64_t Topology::rank_of(int64_t tp, int64_t dp, int64_t pp) const {
  return tp + sizes_.tensor * (dp + sizes_.data * pp);
}

std::vector<int64_t> Topology::tensor_group() const {
  std::vector<int64_t> g;
  for (int64_t t = 0; t < sizes_.tensor; ++t) g.push_back(rank_of(t, data_rank(), pipeline_rank()));
  return g;
}

std::vector<int64_t> Topology::data_group() const {
  std::vector<int64_t> g;
  for (int64_t d = 0; d < sizes_.data; ++d) g.push_back(rank_of(tensor_rank(), d, pipeline_rank()));
  return g;
}

std::vector<int64_t> Topology::pipeline_group() const {
  std::vector<int64_t> g;
  for (int64_t p = 0; p < sizes_.pipeline; ++p) g.push_back(rank_of(tensor_rank(), data_rank(), p));
  return g;
}

std::vector<int64_t> Topology::embedding_group() const {
  std::vector<int64_t> g{rank_of(tensor_rank(), data_rank(), 0)};
  if (sizes_.pipeline > 1) g.push_back(rank_of(tensor_rank(), data_rank(), sizes_.pipeline - 1));
  return g;
}

std::string Topology::tensor_group_node_warning(const std::vector<int64_t>& nodes) const {
  MTNLG_CHECK_EQ(static_cast<int64_t>(nodes.size()), sizes_.tensor);
  if (std::all_of(nodes.begin(), nodes.end(), [&](int64_t n) { return n == nodes.front(); }))
    return "";
  const std::vector<int64_t> ranks = tensor_group();
  std::string where;
  for (size_t i = 0; i < nodes.size(); ++i)
    where += (i ? ", " : "") + std::string("rank ") + std::to_string(ranks[i]) + " on node " +
             std::to_string(nodes[i]);
  return "tensor-parallel group spans nodes (" + where +
         "): its all-reduces, two per layer in "
         "each direction, cross the inter-node network; launch whole multiples of "
         "parallel.tensor = " +
         std::to_string(sizes_.tensor) +
         " ranks per node (e.g. srun --ntasks-per-node) or lower parallel.tensor";
}

std::string Topology::describe() const {
  return "rank " + std::to_string(rank_) + ": tp " + std::to_string(tensor_rank()) + "/" +
         std::to_string(sizes_.tensor) + ", dp " + std::to_string(data_rank()) + "/" +
         std::to_string(sizes_.data) + ", pp " + std::to_string(pipeline_rank()) + "/" +
         std::to_string(sizes_.pipeline);
}

}  // namespace mtnlg
