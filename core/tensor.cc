#include "core/tensor.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <sstream>

namespace mtnlg {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return 4;
    case DType::kF64:
      return 8;
    case DType::kBF16:
      return 2;
    case DType::kF16:
      return 2;
    case DType::kI32:
      return 4;
  }
  return 0;
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "f32";
    case DType::kF64:
      return "f64";
    case DType::kBF16:
      return "bf16";
    case DType::kF16:
      return "f16";
    case DType::kI32:
      return "i32";
  }
  return "?";
}

DType acc_dtype(DType dtype) {
  return dtype == DType::kBF16 || dtype == DType::kF16 ? DType::kF32 : dtype;
}

const char* device_name(Device device) {
  return device == Device::kCPU ? "cpu" : "cuda";
}

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_str(const Shape& shape) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << "]";
  return os.str();
}

Tensor::Tensor(std::shared_ptr<Storage> storage, size_t offset_bytes, Shape shape, DType dtype)
    : storage_(std::move(storage)),
      offset_bytes_(offset_bytes),
      shape_(std::move(shape)),
      dtype_(dtype) {
  for (int64_t d : shape_) MTNLG_CHECK_GE(d, 0);
  MTNLG_CHECK_LE(offset_bytes_ + nbytes(), storage_->bytes());
}

Tensor Tensor::cpu(Shape shape, DType dtype) {
  const size_t bytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
  const size_t rounded = (bytes + 63) / 64 * 64;
  void* p = rounded ? std::aligned_alloc(64, rounded) : nullptr;
  if (rounded && !p) throw std::bad_alloc();
  if (p) std::memset(p, 0, rounded);
  auto storage = std::make_shared<Storage>(p, bytes, Device::kCPU, [](void* q) { std::free(q); });
  return Tensor(std::move(storage), 0, std::move(shape), dtype);
}

Tensor Tensor::borrow(void* data, Shape shape, DType dtype, Device device) {
  const size_t bytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
  auto storage = std::make_shared<Storage>(data, bytes, device, nullptr);
  return Tensor(std::move(storage), 0, std::move(shape), dtype);
}

int64_t Tensor::dim(int i) const {
  const int n = ndim();
  if (i < 0) i += n;
  MTNLG_CHECK_MSG(i >= 0 && i < n, "dim " << i << " of " << str());
  return shape_[static_cast<size_t>(i)];
}

void* Tensor::data() const {
  MTNLG_CHECK_MSG(storage_ != nullptr, "undefined tensor");
  return static_cast<char*>(storage_->data()) + offset_bytes_;
}

Tensor Tensor::view(Shape shape) const {
  MTNLG_CHECK_MSG(shape_numel(shape) == numel(), "view " << shape_str(shape) << " of " << str());
  return Tensor(storage_, offset_bytes_, std::move(shape), dtype_);
}

Tensor Tensor::slice(int64_t begin, int64_t end) const {
  MTNLG_CHECK_MSG(ndim() >= 1 && 0 <= begin && begin <= end && end <= shape_[0],
                  "slice [" << begin << ", " << end << ") of " << str());
  Shape s = shape_;
  s[0] = end - begin;
  const size_t row = static_cast<size_t>(shape_numel(shape_) / (shape_[0] ? shape_[0] : 1));
  return Tensor(storage_, offset_bytes_ + static_cast<size_t>(begin) * row * dtype_size(dtype_),
                std::move(s), dtype_);
}

Tensor Tensor::as_2d() const {
  MTNLG_CHECK_GE(ndim(), 1);
  const int64_t cols = shape_.back();
  return view({cols ? numel() / cols : 0, cols});
}

std::string Tensor::str() const {
  return std::string(dtype_name(dtype_)) + shape_str(shape_) + " " + device_name(device());
}

}  // namespace mtnlg
