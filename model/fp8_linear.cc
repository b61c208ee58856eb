#include "model/fp8_linear.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <utility>

#include "core/status.h"

namespace mtnlg {

const char* Fp8Linears::name(Which w) {
  switch (w) {
    case kQkv:
      return "self_attention.query_key_value";
    case kDense:
      return "self_attention.dense";
    case kFc1:
      return "mlp.dense_h_to_4h";
    case kFc2:
      return "mlp.dense_4h_to_h";
  }
  return "?";
}

Fp8Linears::Fp8Linears(const Fp8Options& o, std::vector<int64_t> layers, Communicator* tensor)
    : o_(o), layers_(std::move(layers)), tensor_(tensor) {
  scaling_.reserve(layers_.size() * kPerLayer);
  for (size_t i = 0; i < layers_.size() * kPerLayer; ++i) scaling_.emplace_back(o_);
}

Fp8LinearScaling& Fp8Linears::at(int64_t layer, Which w) {
  for (size_t i = 0; i < layers_.size(); ++i)
    if (layers_[i] == layer) return scaling_[i * kPerLayer + static_cast<size_t>(w)];
  MTNLG_CHECK_MSG(false, "fp8: layer " << layer << " is not on this stage");
  return scaling_.front();
}

Fp8Linears::BufferSizes Fp8Linears::buffer_elements(const GPTConfig& c, int64_t b) {
  const int64_t rows = b * c.seq, h = c.hidden, f = c.local_ffn(),
                qkv = 3 * c.local_attention_width();
  // x: qkv and fc1 read [rows, h], dense [rows, h/tp], fc2 [rows, f/tp]; W: qkv [3h/tp, h],
  // dense [h, h/tp], fc1 [f/tp, h], fc2 [h, f/tp]; dy: each one's output rows.
  return {rows * std::max(h, f), h * std::max(qkv, f), rows * std::max({qkv, h, f})};
}

namespace {
// A layer's four local linear weights' elements in Fp8Linears::Which order.
std::array<int64_t, Fp8Linears::kPerLayer> weight_elements(const GPTConfig& c) {
  const int64_t h = c.hidden, aw = c.local_attention_width(), f = c.local_ffn();
  return {3 * aw * h, h * aw, f * h, h * f};
}
}  // namespace

int64_t Fp8Linears::weight_cache_elements(const GPTConfig& c, int64_t layers, const Fp8Options& o) {
  if (!o.cache_weights) return 0;
  int64_t per_layer = 0;
  for (const int64_t n : weight_elements(c)) per_layer += n;
  return layers * per_layer;
}

void Fp8Linears::reserve(Backend& be, const GPTConfig& c, int64_t b) {
  if (o_.cache_weights && !weight_cache_.defined()) {
    const auto layers = static_cast<int64_t>(layers_.size());
    weight_cache_ =
        be.alloc({std::max<int64_t>(1, weight_cache_elements(c, layers, o_))}, DType::kBF16);
    const auto sizes = weight_elements(c);
    weight_offset_.clear();
    int64_t at = 0;
    for (int64_t l = 0; l < layers; ++l)
      for (const int64_t n : sizes) {
        weight_offset_.push_back(at);
        at += n;
      }
    weight_offset_.push_back(at);  // the end
    cached_in_.assign(scaling_.size(), 0);
    cached_.assign(scaling_.size(), Cast{});
  }
  if (o_.scaling == Fp8ScalingMode::kDelayed && !amax_bits_.defined()) {
    // One word a tensor, and evaluation's (which records nothing) last.
    be_ = &be;
    amax_bits_ = be.alloc({amax_words(static_cast<int64_t>(layers_.size()))}, DType::kI32);
    be.fill(amax_bits_, 0.0);
  }
  const BufferSizes n = buffer_elements(c, b);
  const int64_t want[3] = {n.x, n.w, n.dy};
  for (int i = 0; i < 3; ++i)
    if (!buffers_[i].defined() || buffers_[i].numel() < want[i]) {
      buffers_[i] = Tensor();  // freed before the larger one is made
      buffers_[i] = be.alloc({want[i]}, DType::kBF16);
    }
}

Fp8Linears::Cast Fp8Linears::cast(Backend& be, int slot, const Tensor& t, Fp8TensorScaling& s) {
  Tensor& buf = buffers_[slot];
  MTNLG_CHECK_MSG(buf.defined() && buf.numel() >= t.numel(),
                  "fp8: cast buffer " << slot << " not reserved for " << t.str());
  return cast_into(be, buf.slice(0, t.numel()).view(t.shape()), t, s);
}

Fp8Linears::Cast Fp8Linears::cast_weight(Backend& be, const Tensor& w, Fp8TensorScaling& s) {
  const uint64_t window = be.frozen_window();
  if (window == 0 || !o_.cache_weights) return cast(be, 1, w, s);
  MTNLG_CHECK_MSG(weight_cache_.defined(), "fp8: weight cache not reserved for " << w.str());
  const int64_t word = word_of(s);
  MTNLG_CHECK_MSG(word % 3 == 1, "fp8: cast_weight with an input's or a gradient's scaling");
  const auto i = static_cast<size_t>(word / 3);
  if (cached_in_[i] == window) {
    ++weight_counts_.reused;
    return cached_[i];
  }
  const int64_t begin = weight_offset_[i], end = weight_offset_[i + 1];
  MTNLG_CHECK_MSG(end - begin == w.numel(),
                  "fp8: weight " << w.str() << " does not fit its cache entry of " << end - begin
                                 << " elements (the stage's shapes changed after reserve)");
  cached_[i] = cast_into(be, weight_cache_.slice(begin, end).view(w.shape()), w, s);
  cached_in_[i] = window;
  be.hold_weight(w);
  ++weight_counts_.made;
  return cached_[i];
}

Fp8Linears::Cast Fp8Linears::cast_into(Backend& be, Tensor q, const Tensor& t,
                                       Fp8TensorScaling& s) {
  if (o_.scaling == Fp8ScalingMode::kCurrent) {
    // The tensor's own amax: no state (a rank's micro-batches each cast with their own scale);
    // a shard's, the whole tensor's over the tensor group.
    auto amax = static_cast<float>(be.abs_max(t));
    if (tensor_ != nullptr && tensor_->size() > 1) {
      Tensor a = Tensor::cpu({1}, DType::kF32);
      a.data_as<float>()[0] = amax;
      tensor_->all_reduce(a, ReduceOp::kMax);
      amax = a.data_as<float>()[0];
    }
    const float scale = fp8_scale_for(amax, s.format(), o_.margin, 1.0f);
    be.fp8_cast(q, t, scale, s.format());
    return {q, static_cast<double>(1.0f / scale), s.format()};
  }
  // Delayed: the amax raised in the tensor's word on the device, read at the step's end (a read
  // back per cast would stop a GPU's queue twenty times a layer).
  const int64_t word = recording_ ? word_of(s) : amax_bits_.numel() - 1;
  Tensor bits = amax_bits_.slice(word, word + 1);
  be.fp8_cast_accumulate(q, t, s.scale(), s.format(), bits);
  return {q, static_cast<double>(s.scale_inv()), s.format()};
}

int64_t Fp8Linears::word_of(const Fp8TensorScaling& s) const {
  for (size_t i = 0; i < scaling_.size(); ++i) {
    const Fp8LinearScaling& l = scaling_[i];
    const auto base = static_cast<int64_t>(i) * 3;
    if (&s == &l.input) return base;
    if (&s == &l.weight) return base + 1;
    if (&s == &l.grad) return base + 2;
  }
  MTNLG_CHECK_MSG(false, "fp8: a cast with a scaling that is not this stage's");
  return 0;
}

void Fp8Linears::end_step(const std::vector<Communicator*>& groups) {
  if (o_.scaling != Fp8ScalingMode::kDelayed) return;
  const auto each = [&](auto&& f) {
    for (Fp8LinearScaling& l : scaling_) {
      f(l.input);
      f(l.weight);
      f(l.grad);
    }
  };
  // The step's amaxes: the words the casts raised (one read back), then the largest over the
  // groups: a host tensor, as the CPU's groups take (NCCL groups stage a host tensor through the
  // device themselves).
  const auto n = static_cast<int64_t>(scaling_.size() * 3);
  Tensor amax = Tensor::cpu({n}, DType::kF32);
  float* a = amax.data_as<float>();
  if (amax_bits_.defined()) {
    Tensor bits = Tensor::cpu({n + 1}, DType::kI32);
    be_->copy(bits, amax_bits_);
    be_->fill(amax_bits_, 0.0);  // the next step's
    const int32_t* w = bits.data_as<int32_t>();
    for (int64_t i = 0; i < n; ++i) a[i] = fp8_amax_from_bits(static_cast<uint32_t>(w[i]));
  } else {
    for (int64_t i = 0; i < n; ++i) a[i] = 0.0f;  // no cast yet (the buffers are not made)
  }
  for (Communicator* g : groups)
    if (g != nullptr && g->size() > 1) g->all_reduce(amax, ReduceOp::kMax);
  int64_t i = 0;
  each([&](Fp8TensorScaling& s) { s.record(a[i++]); });
  each([](Fp8TensorScaling& s) { s.update(); });
}

std::vector<std::pair<std::string, std::string>> Fp8Linears::save() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (size_t i = 0; i < layers_.size(); ++i)
    for (int w = 0; w < kPerLayer; ++w) {
      const Fp8LinearScaling& l = scaling_[i * kPerLayer + static_cast<size_t>(w)];
      const std::string base =
          "layers." + std::to_string(layers_[i]) + "." + name(static_cast<Which>(w)) + ".";
      out.emplace_back(base + "input", l.input.serialize());
      out.emplace_back(base + "weight", l.weight.serialize());
      out.emplace_back(base + "grad", l.grad.serialize());
    }
  return out;
}

void Fp8Linears::load(const std::vector<std::pair<std::string, std::string>>& states) {
  const std::map<std::string, std::string> by_name(states.begin(), states.end());
  for (size_t i = 0; i < layers_.size(); ++i)
    for (int w = 0; w < kPerLayer; ++w) {
      Fp8LinearScaling& l = scaling_[i * kPerLayer + static_cast<size_t>(w)];
      const std::string base =
          "layers." + std::to_string(layers_[i]) + "." + name(static_cast<Which>(w)) + ".";
      for (auto [what, s] : {std::pair<const char*, Fp8TensorScaling*>{"input", &l.input},
                             {"weight", &l.weight},
                             {"grad", &l.grad}}) {
        const auto it = by_name.find(base + what);
        if (it == by_name.end())
          throw not_found("no FP8 scaling state for " + base + what +
                              ": the checkpoint was not saved by a precision: fp8 run",
                          "fp8");
        s->deserialize(it->second, "FP8 scaling state " + base + what);
      }
    }
}

std::vector<StateTensor> Fp8Linears::state_tensors() const {
  std::vector<StateTensor> out;
  for (const auto& [name, bytes] : save()) {
    const auto words = static_cast<int64_t>((bytes.size() + 1) / 2);
    Tensor t = Tensor::cpu({words + 1}, DType::kF32);
    float* w = t.data_as<float>();
    w[0] = static_cast<float>(bytes.size() %
                              2);  // an odd byte count: the last word's high byte is padding
    for (int64_t i = 0; i < words; ++i) {
      const auto lo = static_cast<uint8_t>(bytes[static_cast<size_t>(2 * i)]);
      const size_t hi_at = static_cast<size_t>(2 * i + 1);
      const uint8_t hi = hi_at < bytes.size() ? static_cast<uint8_t>(bytes[hi_at]) : 0;
      w[i + 1] = static_cast<float>(lo | (hi << 8));
    }
    StateTensor st;
    st.name = kStatePrefix + name;
    st.global_shape = {words + 1};
    st.start = {0};
    st.shape = {words + 1};
    st.flat_begin = 0;
    st.flat_end = words + 1;
    st.tensor = t;
    out.push_back(std::move(st));
  }
  return out;
}

std::string Fp8Linears::bytes_of(const Tensor& words) {
  const float* w = words.data_as<float>();
  const int64_t n = words.numel();
  std::string bytes;
  if (n < 1 || (w[0] != 0.0f && w[0] != 1.0f))
    return bytes;  // not one of ours: deserialize says so
  for (int64_t i = 1; i < n; ++i) {
    const float v = w[i];
    if (!(v >= 0.0f && v <= 65535.0f) || v != std::floor(v)) return {};
    const auto u = static_cast<uint32_t>(v);
    bytes.push_back(static_cast<char>(u & 0xFF));
    bytes.push_back(static_cast<char>(u >> 8));
  }
  if (w[0] == 1.0f && !bytes.empty()) bytes.pop_back();
  return bytes;
}

void fp8_gemm_forward(Backend& be, Fp8Linears& f, Fp8LinearScaling& s, Tensor y, const Tensor& x,
                      const Param& w) {
  const Fp8Linears::Cast qx = f.cast(be, 0, x.as_2d(), s.input);
  const Fp8Linears::Cast qw = f.cast_weight(be, w.value, s.weight);
  Tensor y2 = y.as_2d();
  be.gemm_fp8(y2, qx.q, false, qw.q, true, qx.scale_inv * qw.scale_inv, 0.0, qx.format, qw.format);
}

void fp8_linear_forward(Backend& be, Fp8Linears& f, Fp8LinearScaling& s, Tensor y, const Tensor& x,
                        const Param& w, const Param& b, Tensor* act_out, Activation act) {
  fp8_gemm_forward(be, f, s, y, x, w);
  Tensor y2 = y.as_2d();
  be.add_bias(y2, b.value);
  if (act_out != nullptr) be.gelu_forward(*act_out, y, act);
}

void fp8_linear_backward(Backend& be, Fp8Linears& f, Fp8LinearScaling& s, Tensor dx,
                         const Tensor& dy, const Tensor& x, Param& w, Param* b) {
  const Tensor dy2 = dy.as_2d();
  const Fp8Linears::Cast qg = f.cast(be, 2, dy2, s.grad);
  if (dx.defined()) {
    const Fp8Linears::Cast qw = f.cast_weight(be, w.value, s.weight);
    Tensor dx2 = dx.as_2d();
    be.gemm_fp8(dx2, qg.q, false, qw.q, false, qg.scale_inv * qw.scale_inv, 0.0, qg.format,
                qw.format);
  }
  const Fp8Linears::Cast qx = f.cast(be, 0, x.as_2d(), s.input);
  be.gemm_fp8(w.grad, qg.q, true, qx.q, false, qg.scale_inv * qx.scale_inv, 1.0, qg.format,
              qx.format);
  if (b != nullptr) be.bias_backward(b->grad, dy2);
}

}  // namespace mtnlg
