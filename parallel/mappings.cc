#include "parallel/mappings.h"

namespace mtnlg {

namespace {

bool trivial(const Communicator* group) {
  return group == nullptr || group->size() == 1;
}

void all_reduce_on_host(Backend& be, Tensor& t, Communicator* group, const char* what) {
  if (trivial(group)) return;
  MTNLG_CHECK_MSG(be.device() == Device::kCPU,
                  what << ": tensor parallelism over Gloo needs host tensors (CPU backend); "
                          "backend "
                       << be.name());
  be.synchronize();
  group->all_reduce(t, ReduceOp::kSum);
}

}  // namespace

void copy_to_tensor_region_backward(Backend& be, Tensor& grad, Communicator* tensor) {
  all_reduce_on_host(be, grad, tensor, "copy_to_tensor_region backward");
}

void reduce_from_tensor_region_forward(Backend& be, Tensor& x, Communicator* tensor) {
  all_reduce_on_host(be, x, tensor, "reduce_from_tensor_region forward");
}

void all_reduce_max(Tensor& host, Communicator* tensor) {
  if (!trivial(tensor)) tensor->all_reduce(host, ReduceOp::kMax);
}

void all_reduce_sum(Tensor& host, Communicator* tensor) {
  if (!trivial(tensor)) tensor->all_reduce(host, ReduceOp::kSum);
}

}  // namespace mtnlg
