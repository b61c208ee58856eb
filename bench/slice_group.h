// A tensor-parallel group of N ranks of which only this one exists: mtnlg-bench-train's
// --tensor-slice, which trains what one tensor rank of N holds (its shards of every layer) on
// one device, to time the compute of a model too large for one device (the 530B recipe's layer
// as one of 8 tensor ranks holds it). Its collectives leave the tensors as they are: the math
// is a rank's without its peers' sums (the loss is not the model's), and no communication time
// is in the figures. Only for timing; a sequence-parallel or pipelined run is refused.
#pragma once

#include <stdexcept>
#include <string>

#include "parallel/communicator.h"

namespace mtnlg::bench {

class SliceGroup final : public Communicator {
 public:
  explicit SliceGroup(int size) : size_(size) {}
  int rank() const override { return 0; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }
  std::string description() const override {
    return "group 'tensor' (a slice: rank 0 of " + std::to_string(size_) +
           ", its peers absent, collectives skipped)";
  }
  void all_reduce(Tensor&, ReduceOp) override {}
  void broadcast(Tensor&, int) override {}
  void barrier() override {}
  void reduce_scatter(Tensor&, const Tensor&, ReduceOp) override { refuse("reduce_scatter"); }
  void all_gather(Tensor&, const Tensor&) override { refuse("all_gather"); }
  void send(const Tensor&, int) override { refuse("send"); }
  void recv(Tensor&, int) override { refuse("recv"); }
  void batch_send_recv(std::vector<P2POp>&) override { refuse("batch_send_recv"); }
  int64_t bytes_sent() const override { return 0; }

 private:
  [[noreturn]] static void refuse(const char* op) {
    throw std::logic_error(std::string("--tensor-slice: ") + op +
                           " has no meaning without the peers (sequence parallelism and "
                           "pipelines are not sliced)");
  }
  int size_;
  std::string name_ = "tensor";
};

}  // namespace mtnlg::bench
