#include "parallel/mappings.h"

namespace mtnlg {

namespace {

bool trivial(const Communicator* group) {
  return group == nullptr || group->size() == 1;
}

// The group checks that it can carry the backend's tensors (NCCL takes device tensors, the CPU
// transports host ones, each refusing the other by name): not the mappings' business.
void all_reduce_sum_synchronized(Backend& be, Tensor& t, Communicator* group) {
  if (trivial(group)) return;
  be.synchronize();
  group->all_reduce(t, ReduceOp::kSum);
}

}  // namespace

void copy_to_tensor_region_backward(Backend& be, Tensor& grad, Communicator* tensor) {
  all_reduce_sum_synchronized(be, grad, tensor);
}

void reduce_from_tensor_region_forward(Backend& be, Tensor& x, Communicator* tensor) {
  all_reduce_sum_synchronized(be, x, tensor);
}

void all_gather_rows(Backend& be, Tensor& full, const Tensor& local, Communicator* tensor) {
  if (trivial(tensor)) {
    be.copy(full, local);
    return;
  }
  be.synchronize();
  Tensor out = full.view({full.numel()});
  tensor->all_gather(out, local.view({local.numel()}));
}

void reduce_scatter_rows(Backend& be, Tensor& local, const Tensor& full, Communicator* tensor) {
  if (trivial(tensor)) {
    be.copy(local, full);
    return;
  }
  be.synchronize();
  Tensor out = local.view({local.numel()});
  tensor->reduce_scatter(out, full.view({full.numel()}), ReduceOp::kSum);
}

void sum_over_tensor_group(Backend& be, Tensor& t, Communicator* tensor) {
  all_reduce_sum_synchronized(be, t, tensor);
}

void all_reduce_max(Tensor& t, Communicator* tensor) {
  if (!trivial(tensor)) tensor->all_reduce(t, ReduceOp::kMax);
}

void all_reduce_sum(Tensor& t, Communicator* tensor) {
  if (!trivial(tensor)) tensor->all_reduce(t, ReduceOp::kSum);
}

}  // namespace mtnlg
