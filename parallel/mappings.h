// Tensor-parallel mappings: the conjugate communication pairs of Megatron-LM's
// tensor_parallel/mappings.py, written as explicit forward and backward functions (this engine has
// no autograd; a module calls the forward half in its forward and the backward half in its
// backward). Every function is a no-op for a null or one-rank group.
//
// Tensors are the backend's, and the group must carry them: NCCL groups device tensors, the CPU
// transports host ones (each refuses the other, naming the operation and group). The backend is
// synchronized before each collective.
// Thread safety: as the Communicator (one thread drives a group at a time).
#pragma once

#include "core/backend.h"
#include "parallel/communicator.h"

namespace mtnlg {

// copy_to_tensor_region: forward identity, backward all-reduce (sum) over the tensor group; any
// dim. Enters a column-parallel region whose input is replicated.
inline void copy_to_tensor_region_forward(Backend&, Tensor&, Communicator*) {}
void copy_to_tensor_region_backward(Backend& be, Tensor& grad, Communicator* tensor);

// reduce_from_tensor_region: forward all-reduce (sum), backward identity; any dim. Leaves a
// row-parallel region whose outputs are partial sums.
void reduce_from_tensor_region_forward(Backend& be, Tensor& x, Communicator* tensor);
inline void reduce_from_tensor_region_backward(Backend&, Tensor&, Communicator*) {}

// Sequence parallelism (Megatron-LM's gather_from_sequence_parallel_region and
// reduce_scatter_to_sequence_parallel_region), over token rows: rank r's local tensor holds rows
// [r * n/tp, (r + 1) * n/tp) of the n rows of the full one (dim 0 of as_2d()).
// all_gather_rows: full = the ranks' local tensors in rank order. The forward of "gather" and the
// backward of "reduce-scatter".
void all_gather_rows(Backend& be, Tensor& full, const Tensor& local, Communicator* tensor);
// reduce_scatter_rows: local = rows r of the sum over the group of full. The forward of
// "reduce-scatter" (leaving a row-parallel GEMM) and the backward of "gather".
void reduce_scatter_rows(Backend& be, Tensor& local, const Tensor& full, Communicator* tensor);
// Sum over the tensor group in place: the gradients of parameters replicated over it that each
// rank computed from its own rows (LayerNorm's, under sequence parallelism).
void sum_over_tensor_group(Backend& be, Tensor& t, Communicator* tensor);

// The vocab-parallel reductions, in place on the backend's device: the cross entropy's per-row
// statistics (f64: max of the local row maxima, sum of the local sums) and the embedding's
// partial sums.
void all_reduce_max(Tensor& t, Communicator* tensor);
void all_reduce_sum(Tensor& t, Communicator* tensor);

}  // namespace mtnlg
