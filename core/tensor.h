// Tensor: a dense, row-major (contiguous) n-d array with a dtype and a device.
//
// A Tensor is a cheap handle: copies share the same Storage (shared ownership), and view()
// and slice() return handles onto part of it. Storage either owns its bytes (allocated by a
// Backend) or borrows them (Tensor::borrow over memory somebody else keeps alive, such as an
// mmap'ed file). Tensors are not thread-safe to mutate concurrently; handles may be copied
// across threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/kernels/bf16_math.h"
#include "core/status.h"

namespace mtnlg {

enum class DType : uint8_t { kF32, kF64, kBF16, kF16, kI32 };
enum class Device : uint8_t { kCPU, kCUDA };

size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);
const char* device_name(Device device);
// The dtype kernels compute in and parameter gradients are kept in for `dtype`: f32 for bf16
// (fp32 main gradients, fp32 LayerNorm and loss statistics), the dtype itself otherwise.
DType acc_dtype(DType dtype);

using Shape = std::vector<int64_t>;
int64_t shape_numel(const Shape& shape);
std::string shape_str(const Shape& shape);

template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::kF32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::kF64;
}
template <>
constexpr DType dtype_of<Bf16>() {
  return DType::kBF16;
}
template <>
constexpr DType dtype_of<F16>() {
  return DType::kF16;
}
template <>
constexpr DType dtype_of<int32_t>() {
  return DType::kI32;
}

// A block of device memory. The deleter (empty for borrowed memory) frees it.
class Storage {
 public:
  Storage(void* data, size_t bytes, Device device, std::function<void(void*)> deleter)
      : data_(data), bytes_(bytes), device_(device), deleter_(std::move(deleter)) {}
  ~Storage() {
    if (deleter_) deleter_(data_);
  }
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }

 private:
  void* data_;
  size_t bytes_;
  Device device_;
  std::function<void(void*)> deleter_;
};

class Tensor {
 public:
  Tensor() = default;
  Tensor(std::shared_ptr<Storage> storage, size_t offset_bytes, Shape shape, DType dtype);

  // A new zero-filled CPU tensor (64-byte aligned). Device tensors come from a Backend.
  static Tensor cpu(Shape shape, DType dtype);
  // A non-owning CPU view over `data`; the caller keeps the memory alive.
  static Tensor borrow(void* data, Shape shape, DType dtype, Device device = Device::kCPU);

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  int ndim() const { return static_cast<int>(shape_.size()); }
  int64_t dim(int i) const;  // negative i counts from the end
  int64_t numel() const { return shape_numel(shape_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  DType dtype() const { return dtype_; }
  Device device() const { return storage_ ? storage_->device() : Device::kCPU; }

  void* data() const;
  template <typename T>
  T* data_as() const {
    MTNLG_CHECK_MSG(dtype_ == dtype_of<T>(), "tensor is " << dtype_name(dtype_));
    return static_cast<T*>(data());
  }

  // Same bytes, another shape with the same numel.
  Tensor view(Shape shape) const;
  // Rows [begin, end) along dimension 0.
  Tensor slice(int64_t begin, int64_t end) const;
  // Collapses all leading dimensions: [a, b, ..., c] -> [a*b*..., c].
  Tensor as_2d() const;

  std::string str() const;  // "f32[2, 3] cpu"

 private:
  std::shared_ptr<Storage> storage_;
  size_t offset_bytes_ = 0;
  Shape shape_;
  DType dtype_ = DType::kF32;
};

}  // namespace mtnlg
