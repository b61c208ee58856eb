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

namespace {

void check_host(const Backend& be, const char* what) {
  MTNLG_CHECK_MSG(be.device() == Device::kCPU,
                  what << ": sequence parallelism over the CPU transports needs host tensors (CPU "
                          "backend); backend "
                       << be.name());
}

}  // namespace

void all_gather_rows(Backend& be, Tensor& full, const Tensor& local, Communicator* tensor) {
  if (trivial(tensor)) {
    be.copy(full, local);
    return;
  }
  check_host(be, "all_gather_rows");
  be.synchronize();
  Tensor out = full.view({full.numel()});
  tensor->all_gather(out, local.view({local.numel()}));
}

void reduce_scatter_rows(Backend& be, Tensor& local, const Tensor& full, Communicator* tensor) {
  if (trivial(tensor)) {
    be.copy(local, full);
    return;
  }
  check_host(be, "reduce_scatter_rows");
  be.synchronize();
  Tensor out = local.view({local.numel()});
  tensor->reduce_scatter(out, full.view({full.numel()}), ReduceOp::kSum);
}

void sum_over_tensor_group(Backend& be, Tensor& t, Communicator* tensor) {
  all_reduce_on_host(be, t, tensor, "sum_over_tensor_group");
}

void all_reduce_max(Tensor& t, Communicator* tensor) {
  if (!trivial(tensor)) tensor->all_reduce(t, ReduceOp::kMax);
}

void all_reduce_sum(Tensor& t, Communicator* tensor) {
  if (!trivial(tensor)) tensor->all_reduce(t, ReduceOp::kSum);
}

}  // namespace mtnlg
