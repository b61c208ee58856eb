// StateTensor: one piece of training state as a checkpoint sees it. Every component that changes
// while training (the model's parameters, the optimizer's moments) lists its state as these, so
// save, load and reshard are one mechanism (checkpoint/) whatever the layout.
//
// A piece is described in the coordinates of the whole (unsplit) tensor, never of a layout's
// flat buffers: `global_shape`, the box this rank's tensor-parallel shard covers (`start`,
// `shape`: per dimension) and, within that box viewed row-major, the element range
// [flat_begin, flat_end) the piece holds (the whole box unless ZeRO-1 cut it). A reader
// assembles any tensor, or any other layout's piece of it, from these alone.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace mtnlg {

struct StateTensor {
  std::string name;  // e.g. "layers.0.mlp.dense_h_to_4h.weight", "exp_avg.<param name>"
  Shape global_shape;
  std::vector<int64_t> start;  // the box's first index per dimension
  Shape shape;                 // the box's extent per dimension
  int64_t flat_begin = 0;      // the piece: elements [flat_begin, flat_end) of the box
  int64_t flat_end = 0;
  // Rows of dimension 0 that carry meaning: rows >= valid_rows are padding (the vocabulary padded
  // for tensor parallelism); a reader zero-fills padding it has no source for. 0: all rows.
  int64_t valid_rows = 0;
  Tensor tensor;  // flat_end - flat_begin elements (borrowed: the component's own memory)
};

}  // namespace mtnlg
