#include "optim/zero_optimizer.h"

#include <algorithm>
#include <cmath>

#include "optim/adamw.h"
#include "parallel/zero_partition.h"

namespace mtnlg {

namespace {

// A parameter viewed as one row of elements.
Tensor flat_view(const Tensor& t) {
  return t.view({t.numel()});
}

}  // namespace

ZeroAdamW::ZeroAdamW(ParamRegistry& params, Backend& backend, const OptimizerConfig& config,
                     GradSync& grads, Communicator& data, Communicator* tensor)
    : params_(params),
      backend_(backend),
      config_(config),
      grads_(grads),
      data_(data),
      tensor_(tensor) {
  const auto& all = params_.params();
  MTNLG_CHECK_MSG(!all.empty(), "ZeroAdamW: the registry has no parameters");
  dtype_ = all.front().value.dtype();
  // bf16/fp16 values: fp32 main gradients, fp32 master weights and moments of the partition.
  const DType state = acc_dtype(dtype_);
  for (const auto& p : all) {
    MTNLG_CHECK_MSG(p.value.defined() && p.grad.defined(),
                    "ZeroAdamW: parameter " << p.spec.name << " is not allocated");
    MTNLG_CHECK_MSG(p.value.dtype() == dtype_,
                    "ZeroAdamW: parameter " << p.spec.name << " is " << dtype_name(p.value.dtype())
                                            << ", expected " << dtype_name(dtype_));
  }
  std::vector<int64_t> numels;
  for (const auto& p : all) numels.push_back(p.value.numel());
  const ZeroPartition part = zero_partition(numels, data_.size(), data_.rank());
  numel_ = part.numel;
  partition_size_ = part.partition_size;
  begin_ = part.begin;
  const int64_t padded = partition_size_ * data_.size();
  MTNLG_CHECK_MSG(grads_.mode() == GradSync::Mode::kReduceScatter &&
                      grads_.layout().partition_size == partition_size_ &&
                      grads_.layout().begin == begin_ && grads_.partition().dtype() == state,
                  "ZeroAdamW: the GradSync does not reduce-scatter this registry over this group");
  for (const ZeroSegment& z : part.segments) {
    // End to end from 0 (step() copies the masters' segments as one piece).
    MTNLG_CHECK_EQ(z.in_part, segments_.empty()
                                  ? int64_t{0}
                                  : segments_.back().in_part + segments_.back().length);
    segments_.push_back({z.param, z.in_param, z.in_part, z.length, all[z.param].spec.no_decay,
                         all[z.param].spec.partition_dim >= 0});
  }

  // The all-gather goes through GradSync's buffers, the partition and the padded gradient buffer
  // (the reduced gradient is consumed by then; the next iteration zeroes the buffer).
  flat_ = grads_.staging();
  part_ = grads_.partition();
  MTNLG_CHECK_EQ(flat_.numel(), padded);
  // The reduced partition is read where GradSync left it (the backend's memory).
  part_grad_ = grads_.partition();
  MTNLG_CHECK_MSG(part_grad_.device() == backend_.device(),
                  "ZeroAdamW: the GradSync's partition is " << part_grad_.str()
                                                            << "; make it with this backend");
  m_ = backend_.alloc({partition_size_}, state);
  v_ = backend_.alloc({partition_size_}, state);
  if (acc_dtype(dtype_) != dtype_) {
    // The masters start as the bf16 values (Megatron clones them), this partition's pieces.
    masters_ = backend_.alloc({partition_size_}, DType::kF32);
    for (const Segment& s : segments_) {
      Tensor dst = masters_.slice(s.in_part, s.in_part + s.length);
      backend_.copy(dst, flat_view(all[s.param].value).slice(s.in_param, s.in_param + s.length));
    }
  }
}

std::vector<StateTensor> ZeroAdamW::state() const {
  std::vector<StateTensor> out;
  const auto& all = params_.params();
  for (const Segment& seg : segments_) {
    const ParamSpec& spec = all[seg.param].spec;
    std::vector<std::pair<std::string, const Tensor*>> pieces = {{exp_avg_name(spec.name), &m_},
                                                                 {exp_avg_sq_name(spec.name), &v_}};
    if (masters_.defined()) pieces.emplace_back(master_name(spec.name), &masters_);
    for (const auto& [name, moment] : pieces) {
      StateTensor s = shard_state(spec, name, moment->slice(seg.in_part, seg.in_part + seg.length));
      s.flat_begin = seg.in_param;
      s.flat_end = seg.in_param + seg.length;
      out.push_back(std::move(s));
    }
  }
  return out;
}

int64_t ZeroAdamW::state_bytes() const {
  return static_cast<int64_t>(m_.nbytes() + v_.nbytes() +
                              (masters_.defined() ? masters_.nbytes() : 0));
}

double ZeroAdamW::grad_norm() {
  // Sharded and replicated parameters' squares apart: the tensor group sums only the shards'.
  // (The zero padding adds nothing.) Every segment in one call: a device backend answers with one
  // synchronization, not one per segment; the values and their order are those of one call each.
  Tensor sum = Tensor::cpu({2}, DType::kF64);
  double* s = sum.data_as<double>();
  s[0] = s[1] = 0.0;
  const auto& all = params_.params();
  std::vector<Tensor> grads;
  std::vector<bool> sharded;
  for (const Segment& seg : segments_) {
    if (all[seg.param].spec.tied == Tied::kCopy) continue;
    grads.push_back(part_grad_.slice(seg.in_part, seg.in_part + seg.length));
    sharded.push_back(seg.sharded);
  }
  const std::vector<double> squares = backend_.sum_squares_many(grads);
  for (size_t i = 0; i < squares.size(); ++i) s[sharded[i] ? 0 : 1] += squares[i];
  data_.all_reduce(sum, ReduceOp::kSum);
  return std::sqrt(tensor_parallel_sum_squares(s[0], s[1], tensor_));
}

void ZeroAdamW::step(double lr, double grad_scale) {
  ++step_;
  auto& all = params_.params();
  AdamWArgs args;
  args.lr = lr;
  args.beta1 = config_.beta1;
  args.beta2 = config_.beta2;
  args.eps = config_.eps;
  args.step = step_;
  args.grad_scale = grad_scale;
  // The update runs on what this rank owns: the values' piece, or with bf16 values the masters.
  const auto owned = [&](const Segment& s) {
    return masters_.defined()
               ? masters_.slice(s.in_part, s.in_part + s.length)
               : flat_view(all[s.param].value).slice(s.in_param, s.in_param + s.length);
  };
  // Every segment in one call (a device backend steps many per launch); the views live in
  // `views` (reserved: the items point into it) until the call returns.
  std::vector<Tensor> views;
  views.reserve(4 * segments_.size());
  std::vector<AdamWItem> items;
  items.reserve(segments_.size());
  for (const Segment& s : segments_) {
    const auto piece = [&](const Tensor& t) {
      views.push_back(t.slice(s.in_part, s.in_part + s.length));
      return &views.back();
    };
    views.push_back(owned(s));
    Tensor* value = &views.back();
    AdamWItem it{value, nullptr, piece(part_grad_), piece(m_), piece(v_), args};
    it.args.weight_decay = s.no_decay ? 0.0 : config_.weight_decay;
    items.push_back(it);
  }
  backend_.adamw_update_many(items);
  // Send the updated partition (padding as zeros), gather everyone's, unpack (bf16 values: the
  // fp32 masters travel and each value is rounded from its master once, on every rank alike;
  // twice Megatron's bytes, as the Gloo collectives carry no bf16). The masters' segments lie
  // end to end from 0 as the partition's do: one copy.
  backend_.synchronize();
  if (masters_.defined() && !segments_.empty()) {
    const int64_t end = segments_.back().in_part + segments_.back().length;
    Tensor dst = part_.slice(0, end);
    backend_.copy(dst, masters_.slice(0, end));
  } else {
    for (const Segment& s : segments_) {
      Tensor dst = part_.slice(s.in_part, s.in_part + s.length);
      backend_.copy(dst, owned(s));
    }
  }
  // The padding goes as zeros: filled on the device, as the rest.
  const int64_t used = segments_.empty() ? 0 : segments_.back().in_part + segments_.back().length;
  if (used < part_.numel()) {
    Tensor tail = part_.slice(used, part_.numel());
    backend_.fill(tail, 0.0);
  }
  data_.all_gather(flat_, part_);
  int64_t offset = 0;
  for (auto& p : all) {
    const int64_t n = p.value.numel();
    Tensor dst = flat_view(p.value);
    backend_.copy(dst, flat_.slice(offset, offset + n));
    offset += n;
  }
}

std::string ZeroAdamW::describe() const {
  return "AdamW with ZeRO-1 over " + std::to_string(data_.size()) + " data ranks";
}

}  // namespace mtnlg
