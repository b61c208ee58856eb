// Tensor handles: allocation, view, slice, borrow, as_2d, shared storage and the checks.
#include <catch2/catch.hpp>

#include <cstdint>

#include "core/tensor.h"

using namespace mtnlg;

TEST_CASE("Tensor::cpu is zero-filled and 64-byte aligned") {
  Tensor t = Tensor::cpu({3, 5}, DType::kF32);
  CHECK(t.numel() == 15);
  CHECK(t.nbytes() == 60);
  CHECK(t.ndim() == 2);
  CHECK(t.dim(-1) == 5);
  CHECK(t.device() == Device::kCPU);
  CHECK(reinterpret_cast<uintptr_t>(t.data()) % 64 == 0);
  for (int64_t i = 0; i < t.numel(); ++i) CHECK(t.data_as<float>()[i] == 0.0f);
  CHECK(t.str() == "f32[3, 5] cpu");
  CHECK_THROWS_AS(t.data_as<double>(), Error);
  CHECK_THROWS_AS(t.dim(2), Error);
}

TEST_CASE("view and as_2d share storage") {
  Tensor t = Tensor::cpu({2, 3, 4}, DType::kF64);
  Tensor v = t.view({6, 4});
  Tensor m = t.as_2d();
  CHECK(m.shape() == Shape{6, 4});
  v.data_as<double>()[5] = 7.0;
  CHECK(t.data_as<double>()[5] == 7.0);
  CHECK(m.data_as<double>()[5] == 7.0);
  CHECK_THROWS_AS(t.view({5, 5}), Error);
  CHECK(Tensor::cpu({7}, DType::kF32).as_2d().shape() == Shape{1, 7});
}

TEST_CASE("slice takes rows along dimension 0") {
  Tensor t = Tensor::cpu({4, 3}, DType::kI32);
  for (int i = 0; i < 12; ++i) t.data_as<int32_t>()[i] = i;
  Tensor s = t.slice(1, 3);
  CHECK(s.shape() == Shape{2, 3});
  CHECK(s.data_as<int32_t>()[0] == 3);
  CHECK(s.data_as<int32_t>()[5] == 8);
  s.data_as<int32_t>()[0] = -1;
  CHECK(t.data_as<int32_t>()[3] == -1);
  CHECK(t.slice(4, 4).numel() == 0);
  CHECK_THROWS_AS(t.slice(2, 5), Error);
  CHECK_THROWS_AS(t.slice(3, 2), Error);
}

TEST_CASE("borrow wraps caller memory without owning it") {
  float data[6] = {1, 2, 3, 4, 5, 6};
  {
    Tensor b = Tensor::borrow(data, {2, 3}, DType::kF32);
    CHECK(b.data() == data);
    b.data_as<float>()[4] = 50.0f;
    Tensor copy = b;  // handles share storage
    CHECK(copy.data() == data);
  }
  CHECK(data[4] == 50.0f);  // still valid: the tensor did not free it
}

TEST_CASE("handles keep storage alive") {
  Tensor s;
  {
    Tensor t = Tensor::cpu({8}, DType::kF32);
    t.data_as<float>()[7] = 3.0f;
    s = t.slice(4, 8);
  }
  CHECK(s.data_as<float>()[3] == 3.0f);
}
