#include "optim/adamw.h"

#include <cmath>
#include <vector>

#include "core/kernels/adamw_math.h"

namespace mtnlg {

double tensor_parallel_sum_squares(double sharded, double replicated, Communicator* tensor) {
  if (tensor == nullptr || tensor->size() == 1) return sharded + replicated;
  Tensor t = Tensor::cpu({1}, DType::kF64);
  t.data_as<double>()[0] = sharded;
  tensor->all_reduce(t, ReduceOp::kSum);
  return t.data_as<double>()[0] + replicated;
}

double global_grad_norm(Backend& backend, const ParamRegistry& params, Communicator* tensor) {
  std::vector<Tensor> grads;
  std::vector<bool> sharded_grad;
  for (const auto& p : params.params()) {
    if (p.spec.tied == Tied::kCopy) continue;
    grads.push_back(p.grad);
    sharded_grad.push_back(p.spec.partition_dim >= 0);
  }
  const std::vector<double> squares = backend.sum_squares_many(grads);
  double sharded = 0.0, replicated = 0.0;
  for (size_t i = 0; i < squares.size(); ++i)
    (sharded_grad[i] ? sharded : replicated) += squares[i];
  return std::sqrt(tensor_parallel_sum_squares(sharded, replicated, tensor));
}

double clip_coefficient(double norm, double max_norm) {
  return kernels::clip_coefficient(norm, max_norm);  // the device's formula too
}

AdamW::AdamW(ParamRegistry& params, Backend& backend, const OptimizerConfig& config,
             Communicator* tensor)
    : params_(params), backend_(backend), config_(config), tensor_(tensor) {
  for (const auto& p : params_.params()) {
    const bool mixed = acc_dtype(p.value.dtype()) != p.value.dtype();  // bf16 or fp16
    const DType state = mixed ? DType::kF32 : p.value.dtype();
    MTNLG_CHECK_MSG(p.grad.dtype() == state,
                    "AdamW: " << p.spec.name << " has " << dtype_name(p.value.dtype())
                              << " values and " << dtype_name(p.grad.dtype()) << " gradients; want "
                              << dtype_name(state) << " gradients");
    MTNLG_CHECK_MSG(masters_.size() == (mixed ? m_.size() : 0),
                    "AdamW: bf16/fp16 and other parameter values mixed in one registry");
    m_.push_back(backend_.alloc(p.spec.local_shape, state));
    v_.push_back(backend_.alloc(p.spec.local_shape, state));
    if (mixed) {
      masters_.push_back(backend_.alloc(p.spec.local_shape, DType::kF32));
      backend_.copy(masters_.back(), p.value);
    }
  }
}

std::string exp_avg_name(const std::string& param) {
  return "exp_avg." + param;
}

std::string exp_avg_sq_name(const std::string& param) {
  return "exp_avg_sq." + param;
}

std::string master_name(const std::string& param) {
  return "master." + param;
}

std::vector<StateTensor> AdamW::state() const {
  std::vector<StateTensor> out;
  size_t i = 0;
  for (const auto& p : params_.params()) {
    out.push_back(shard_state(p.spec, exp_avg_name(p.spec.name), m_[i]));
    out.push_back(shard_state(p.spec, exp_avg_sq_name(p.spec.name), v_[i]));
    if (!masters_.empty())
      out.push_back(shard_state(p.spec, master_name(p.spec.name), masters_[i]));
    ++i;
  }
  return out;
}

int64_t AdamW::state_bytes() const {
  int64_t bytes = 0;
  for (size_t i = 0; i < m_.size(); ++i)
    bytes += static_cast<int64_t>(m_[i].nbytes() + v_[i].nbytes());
  for (const Tensor& master : masters_) bytes += static_cast<int64_t>(master.nbytes());
  return bytes;
}

double AdamW::grad_norm() {
  return global_grad_norm(backend_, params_, tensor_);
}

void AdamW::step(double lr, double grad_scale) {
  ++step_;
  // Every parameter in one call (a device backend steps many per launch). With masters, the
  // master steps and the bf16/fp16 weight is re-rounded from it (nearest even).
  backend_.adamw_update_many(items(lr, grad_scale, step_));
}

std::vector<AdamWItem> AdamW::items(double lr, double grad_scale, int64_t step) {
  std::vector<AdamWItem> items;
  items.reserve(m_.size());
  size_t i = 0;
  for (auto& p : params_.params()) {
    AdamWItem it{&p.value,   masters_.empty() ? nullptr : &masters_[i], &p.grad, &m_[i], &v_[i],
                 AdamWArgs{}};
    it.args.lr = lr;
    it.args.beta1 = config_.beta1;
    it.args.beta2 = config_.beta2;
    it.args.eps = config_.eps;
    it.args.weight_decay = p.spec.no_decay ? 0.0 : config_.weight_decay;
    it.args.step = step;
    it.args.grad_scale = grad_scale;
    items.push_back(it);
    ++i;
  }
  return items;
}

}  // namespace mtnlg
