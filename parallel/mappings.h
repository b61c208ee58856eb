// Tensor-parallel mappings: the conjugate communication pairs of Megatron-LM's
// tensor_parallel/mappings.py, written as explicit forward and backward functions (this engine has
// no autograd; a module calls the forward half in its forward and the backward half in its
// backward). Every function is a no-op for a null or one-rank group.
//
// Tensors are the backend's; the Gloo communicator reads host memory, so these require a CPU
// backend for a group of more than one rank (the CUDA path comes with NCCL). The backend is
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

// The vocab-parallel cross entropy's reductions over per-row host statistics (f64): max of the
// local row maxima, sum of the local sums (sum-exp and the owning rank's target logit).
void all_reduce_max(Tensor& host, Communicator* tensor);
void all_reduce_sum(Tensor& host, Communicator* tensor);

}  // namespace mtnlg
