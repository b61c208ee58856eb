// The NCCL communicator on one GPU (NCCL refuses two ranks on one device, and the lent machines
// have one): a one-rank group's collectives on device tensors and on host tensors, which travel
// through its device staging buffer and back, and its ordering after the backend's stream (an
// event, not a device synchronization). Needs a GPU: without one the executable exits 77.
#include <catch2/catch.hpp>

#include <chrono>
#include <numeric>

#include "core/cuda/cuda_backend.h"
#include "parallel/cuda/nccl_communicator.h"
#include "parallel/store.h"
#include "tests/core/kernel_check.h"

namespace mtnlg {
namespace {

Tensor iota_host(int64_t n, DType dt = DType::kF64) {
  Tensor t = Tensor::cpu({n}, dt);
  for (int64_t i = 0; i < n; ++i) {
    if (dt == DType::kF64)
      t.data_as<double>()[i] = 0.5 * static_cast<double>(i) - 3.0;
    else
      t.data_as<float>()[i] = 0.5f * static_cast<float>(i) - 3.0f;
  }
  return t;
}

TEST_CASE("NCCL one-rank group: host tensors go through the device and come back unchanged") {
  MemoryStore store;
  auto comm = make_nccl_communicator(store, "world", 0, {0}, 0, std::chrono::seconds(30));
  auto gpu = make_cuda_backend(0);
  // all_reduce and broadcast in place on host scalars, as the trainer's loss sums and votes.
  Tensor t = iota_host(5), want = iota_host(5);
  comm->all_reduce(t, ReduceOp::kSum);
  comm->broadcast(t, 0);
  for (int64_t i = 0; i < 5; ++i) CHECK(t.data_as<double>()[i] == want.data_as<double>()[i]);
  // all_gather / reduce_scatter from one host tensor into another.
  Tensor in = iota_host(7, DType::kF32), out = Tensor::cpu({7}, DType::kF32);
  comm->all_gather(out, in);
  for (int64_t i = 0; i < 7; ++i) CHECK(out.data_as<float>()[i] == in.data_as<float>()[i]);
  Tensor out2 = Tensor::cpu({7}, DType::kF32);
  comm->reduce_scatter(out2, in, ReduceOp::kSum);
  for (int64_t i = 0; i < 7; ++i) CHECK(out2.data_as<float>()[i] == in.data_as<float>()[i]);
  // Device tensors as before; a host tensor beside a device one is refused.
  Tensor dev = gpu->alloc({7}, DType::kF32), back = Tensor::cpu({7}, DType::kF32);
  gpu->copy(dev, in);
  comm->all_reduce(dev, ReduceOp::kMax);
  gpu->copy(back, dev);
  for (int64_t i = 0; i < 7; ++i) CHECK(back.data_as<float>()[i] == in.data_as<float>()[i]);
  CHECK_THROWS_WITH(comm->all_gather(dev, in), Catch::Contains("NCCL takes CUDA tensors"));
  // Host tensors past the initial 64 KiB staging buffer (it grows, twice) and a small one after.
  for (int64_t n : {int64_t{40000}, int64_t{300000}, int64_t{3}}) {
    Tensor big = iota_host(n), big_want = iota_host(n);
    comm->all_reduce(big, ReduceOp::kSum);
    INFO(n << " doubles");
    CHECK(test::bitwise_equal(big, big_want));
  }
}

TEST_CASE("NCCL group ordered after the backend's stream reads what the backend queued last") {
  MemoryStore store;
  auto comm = make_nccl_communicator(store, "world", 0, {0}, 0, std::chrono::seconds(30));
  auto gpu = make_cuda_backend(0);
  comm->set_compute_stream(gpu->native_stream());
  REQUIRE(gpu->native_stream() != nullptr);
  // Long work on the backend's stream, then the input: without the event, the copy on the
  // communicator's stream would read the input before the fill ran (alloc zeroed it).
  Tensor a = gpu->alloc({2048, 2048}, DType::kF32), c = gpu->alloc({2048, 2048}, DType::kF32);
  gpu->fill(a, 0.001);
  for (int round = 0; round < 3; ++round) {
    Tensor src = gpu->alloc({1 << 20}, DType::kF32), out = gpu->alloc({1 << 20}, DType::kF32);
    for (int k = 0; k < 8; ++k) gpu->gemm(c, a, false, a, false, 1.0, 0.0);
    gpu->fill(src, 7.0 + round);
    comm->all_gather(out, src);  // one rank: a copy on the communicator's stream
    Tensor back = Tensor::cpu({1 << 20}, DType::kF32);
    gpu->copy(back, out);
    const float* b = back.data_as<float>();
    int64_t wrong = 0;
    for (int64_t i = 0; i < back.numel(); ++i) wrong += b[i] != 7.0f + static_cast<float>(round);
    CHECK(wrong == 0);
  }
}

}  // namespace
}  // namespace mtnlg
