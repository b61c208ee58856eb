// The tensor-parallel mappings (parallel/mappings.h) on a device backend: they hand the tensors
// to the group after synchronizing the backend, and leave the question of which tensors a group
// can carry to the group (NCCL takes device tensors, the CPU transports refuse them by name).
// They once refused every non-CPU backend themselves, which made tensor and sequence
// parallelism on GPUs an error before NCCL was ever reached.
#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>
#include <vector>

#include "core/backend.h"
#include "parallel/communicator.h"
#include "parallel/mappings.h"
#include "stub_backend.h"

namespace mtnlg {
namespace {

[[noreturn]] void unused() {
  throw std::logic_error("not used by the mappings");
}

// Says it is a CUDA backend; counts synchronize(); nothing else is called.
class DeviceBackend final : public test::StubBackend {
 public:
  int syncs = 0;
  Device device() const override { return Device::kCUDA; }
  std::string name() const override { return "fake cuda"; }
  void synchronize() override { ++syncs; }
};

// Two ranks; records each collective and how many backend synchronizations preceded it.
class RecordingGroup final : public Communicator {
 public:
  explicit RecordingGroup(const DeviceBackend& be) : be_(be) {}
  std::vector<std::string> calls;
  int rank() const override { return 0; }
  int size() const override { return 2; }
  const std::string& name() const override { return name_; }
  void all_reduce(Tensor&, ReduceOp) override { record("all_reduce"); }
  void reduce_scatter(Tensor&, const Tensor&, ReduceOp) override { record("reduce_scatter"); }
  void all_gather(Tensor&, const Tensor&) override { record("all_gather"); }
  void broadcast(Tensor&, int) override { unused(); }
  void send(const Tensor&, int) override { unused(); }
  void recv(Tensor&, int) override { unused(); }
  void barrier() override { unused(); }
  void batch_send_recv(std::vector<P2POp>&) override { unused(); }
  int64_t bytes_sent() const override { return 0; }

 private:
  void record(const char* op) {
    calls.push_back(op + std::string(" after ") + std::to_string(be_.syncs));
  }
  const DeviceBackend& be_;
  std::string name_ = "tensor";
};

TEST_CASE("the mappings hand a device backend's tensors to the group after synchronizing it") {
  DeviceBackend be;
  RecordingGroup group(be);
  Tensor t = Tensor::cpu({4, 6}, DType::kF32), half = Tensor::cpu({2, 6}, DType::kF32);
  copy_to_tensor_region_backward(be, t, &group);
  reduce_from_tensor_region_forward(be, t, &group);
  sum_over_tensor_group(be, t, &group);
  all_gather_rows(be, t, half, &group);
  reduce_scatter_rows(be, half, t, &group);
  CHECK(group.calls == std::vector<std::string>{"all_reduce after 1", "all_reduce after 2",
                                                "all_reduce after 3", "all_gather after 4",
                                                "reduce_scatter after 5"});
}

}  // namespace
}  // namespace mtnlg
