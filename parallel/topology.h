// Topology: how the world's ranks split into tensor (tp), data (dp) and pipeline (pp) groups.
//
// Megatron-LM's order: the tensor rank varies fastest, then the data rank, then the pipeline
// rank, so the tp ranks of a replica are consecutive (and share a node when tp <= GPUs per node):
//
//   rank = tp_rank + tp * (dp_rank + dp * pp_rank)
//
// Worked example, world 8 = tp 2 x dp 2 x pp 2:
//   tensor groups   {0,1} {2,3} {4,5} {6,7}
//   data groups     {0,2} {1,3} {4,6} {5,7}
//   pipeline groups {0,4} {1,5} {2,6} {3,7}
//   embedding groups (first and last stage) = the pipeline groups when pp > 1
// A Topology is an immutable value; groups travel in it, never as globals.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mtnlg {

struct ParallelSizes {
  int64_t tensor = 1;
  int64_t pipeline = 1;
  int64_t data = 1;
  int64_t world() const { return tensor * pipeline * data; }
};

class Topology {
 public:
  // Throws invalid_argument naming parallel.* when world is not tensor * pipeline * data.
  Topology(ParallelSizes sizes, int64_t rank);

  // data = world / (tensor * pipeline); throws naming the numbers when it does not divide.
  static ParallelSizes derive(int64_t world, int64_t tensor, int64_t pipeline);

  const ParallelSizes& sizes() const { return sizes_; }
  int64_t rank() const { return rank_; }
  int64_t tensor_rank() const { return rank_ % sizes_.tensor; }
  int64_t data_rank() const { return rank_ / sizes_.tensor % sizes_.data; }
  int64_t pipeline_rank() const { return rank_ / (sizes_.tensor * sizes_.data); }
  bool is_first_stage() const { return pipeline_rank() == 0; }
  bool is_last_stage() const { return pipeline_rank() == sizes_.pipeline - 1; }

  int64_t rank_of(int64_t tp_rank, int64_t dp_rank, int64_t pp_rank) const;
  // The global ranks of this rank's groups, in group-rank order.
  std::vector<int64_t> tensor_group() const;
  std::vector<int64_t> data_group() const;
  std::vector<int64_t> pipeline_group() const;
  // First and last pipeline stage of this rank's (tp, dp) position: the tied embedding's copies.
  std::vector<int64_t> embedding_group() const;

  std::string describe() const;  // "rank 5: tp 1/2, dp 0/2, pp 1/2"

  // Tensor parallelism all-reduces activations twice per layer each way, so its group belongs
  // inside one node (NVLink), as Megatron's order arranges when tp <= ranks per node. Given the
  // node of each member of this rank's tensor group (group order), returns a warning naming the
  // ranks, their nodes and the fix when they are not all on one node; empty otherwise.
  std::string tensor_group_node_warning(const std::vector<int64_t>& nodes) const;

 private:
  ParallelSizes sizes_;
  int64_t rank_;
};

}  // namespace mtnlg
