#include "model/param_registry.h"

#include <algorithm>
#include <vector>

#include "core/rng.h"

namespace mtnlg {

uint64_t name_hash(const std::string& name) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : name) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

int64_t global_index(const ParamSpec& spec, int64_t local) {
  if (spec.partition_dim < 0 || spec.local_shape == spec.global_shape) return local;
  if (spec.partition_dim == 0) return spec.shard_index * shape_numel(spec.local_shape) + local;
  MTNLG_CHECK_MSG(spec.partition_dim == 1 && spec.global_shape.size() == 2,
                  "sharded init of " << spec.name << ": partition dim " << spec.partition_dim);
  const int64_t cols = spec.local_shape[1], row = local / cols, col = local % cols;
  return row * spec.global_shape[1] + spec.shard_index * cols + col;
}

Param& ParamRegistry::add(ParamSpec spec) {
  MTNLG_CHECK_MSG(!contains(spec.name), "duplicate parameter " << spec.name);
  if (spec.local_shape.empty()) spec.local_shape = spec.global_shape;
  index_.emplace(spec.name, params_.size());
  params_.push_back(Param{std::move(spec), Tensor(), Tensor()});
  return params_.back();
}

Param& ParamRegistry::get(const std::string& name) {
  const auto it = index_.find(name);
  if (it == index_.end()) throw not_found("no parameter named '" + name + "'");
  return params_[it->second];
}

const Param& ParamRegistry::get(const std::string& name) const {
  return const_cast<ParamRegistry*>(this)->get(name);
}

bool ParamRegistry::contains(const std::string& name) const {
  return index_.count(name) != 0;
}

int64_t ParamRegistry::local_numel() const {
  int64_t n = 0;
  for (const auto& p : params_) n += shape_numel(p.spec.local_shape);
  return n;
}

int64_t ParamRegistry::global_numel() const {
  int64_t n = 0;
  for (const auto& p : params_) n += shape_numel(p.spec.global_shape);
  return n;
}

void ParamRegistry::allocate(Backend& backend, DType dtype) {
  allocate(backend, dtype, dtype);
}

void ParamRegistry::allocate(Backend& backend, DType dtype, DType grad_dtype,
                             int64_t pad_multiple) {
  MTNLG_CHECK_GT(pad_multiple, 0);
  const int64_t n = local_numel();
  grad_buffer_ = backend.alloc({(n + pad_multiple - 1) / pad_multiple * pad_multiple}, grad_dtype);
  int64_t offset = 0;
  for (auto& p : params_) {
    p.value = backend.alloc(p.spec.local_shape, dtype);
    const int64_t n = shape_numel(p.spec.local_shape);
    p.grad = grad_buffer_.slice(offset, offset + n).view(p.spec.local_shape);
    offset += n;
  }
}

void ParamRegistry::init_values(Backend& backend, uint64_t seed, int64_t chunk) {
  MTNLG_CHECK_MSG(chunk > 0, "init_values: chunk " << chunk);
  // Drawn on the host in double, then converted, so every backend and dtype starts from the
  // same numbers; a tensor-parallel shard draws its elements at their global indices. The draws
  // are about 40 ns an element (Philox, log, cos): a 1.3B model took a minute on one thread, so
  // each chunk is drawn by every thread (each element a function of its index alone: the same
  // bits for any thread count) into one reused buffer, not a fresh f64 copy of each tensor.
  int64_t largest = 0;
  for (const Param& p : params_) largest = std::max(largest, p.value.numel());
  Tensor host = Tensor::cpu({std::min(chunk, std::max<int64_t>(largest, 1))}, DType::kF64);
  double* h = host.data_as<double>();
  for (Param& p : params_) {
    const ParamSpec& spec = p.spec;
    const int64_t n = p.value.numel();
    Tensor flat = p.value.view({n});
    // A spec global_index rejects throws here, not inside the threads (where it would end the
    // process).
    if (spec.init_std > 0 && n > 0) (void)global_index(spec, 0);
    for (int64_t begin = 0; begin < n; begin += chunk) {
      const int64_t len = std::min(chunk, n - begin);
      if (spec.init_std > 0) {
        const RngStream s{seed, name_hash(spec.name), 0};
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < len; ++i) {
          const auto g = static_cast<uint64_t>(global_index(spec, begin + i));
          h[i] = spec.init_std * rng_normal(s, g);
        }
      } else {
        std::fill(h, h + len, spec.init_value);
      }
      Tensor dst = flat.slice(begin, begin + len);
      backend.copy(dst, host.slice(0, len));
    }
  }
}

void ParamRegistry::zero_grads(Backend& backend) {
  if (grad_buffer_.numel() > 0) backend.fill(grad_buffer_, 0.0);
}

StateTensor shard_state(const ParamSpec& spec, std::string name, const Tensor& tensor) {
  StateTensor s;
  s.name = std::move(name);
  s.global_shape = spec.global_shape;
  s.shape = spec.local_shape;
  s.start.assign(spec.global_shape.size(), 0);
  if (spec.partition_dim >= 0) {
    const auto d = static_cast<size_t>(spec.partition_dim);
    s.start[d] = spec.shard_index * spec.local_shape[d];
  }
  s.flat_begin = 0;
  s.flat_end = shape_numel(spec.local_shape);
  s.valid_rows = spec.valid_rows;
  s.tensor = tensor;
  return s;
}

std::vector<StateTensor> ParamRegistry::state() const {
  std::vector<StateTensor> out;
  for (const Param& p : params_) out.push_back(shard_state(p.spec, p.spec.name, p.value));
  return out;
}

}  // namespace mtnlg
