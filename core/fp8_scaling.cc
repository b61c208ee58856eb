#include "core/fp8_scaling.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/status.h"

namespace mtnlg {

float fp8_scale_for(float amax, Fp8Format format, int margin, float fallback) {
  if (!(amax > 0.0f) || !std::isfinite(amax)) return fallback;
  return fp8_max(format) / amax / std::ldexp(1.0f, margin);
}

Fp8TensorScaling::Fp8TensorScaling(Fp8Format format, const Fp8Options& o)
    : format_(format),
      o_(o),
      history_(static_cast<size_t>(std::max<int64_t>(1, o.amax_history_len)), 0.0f) {}

void Fp8TensorScaling::record(float amax) {
  // NaN sticks for the step (a step that overflowed says so in its history, as TE's amax does).
  if (std::isnan(history_[0])) return;
  if (std::isnan(amax) || amax > history_[0]) history_[0] = amax;
}

void Fp8TensorScaling::update() {
  float amax = history_[0];
  if (o_.amax_algo == Fp8AmaxAlgo::kMax)
    for (const float a : history_)
      amax = std::isnan(a) || std::isnan(amax) ? NAN : std::max(amax, a);
  scale_ = fp8_scale_for(amax, format_, o_.margin, scale_);
  scale_inv_ = 1.0f / scale_;
  std::rotate(history_.begin(), history_.begin() + 1, history_.end());
  history_[0] = 0.0f;
}

namespace {

template <typename T>
void put(std::string* s, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  s->append(b, sizeof(T));
}

template <typename T>
T take(const std::string& s, size_t* at, const std::string& what) {
  if (*at + sizeof(T) > s.size())
    throw corruption("FP8 scaling state: " + std::to_string(s.size()) + " bytes end early", what);
  T v;
  std::memcpy(&v, s.data() + *at, sizeof(T));
  *at += sizeof(T);
  return v;
}

}  // namespace

std::string Fp8TensorScaling::serialize() const {
  std::string s;
  put<uint8_t>(&s, static_cast<uint8_t>(format_));
  put<uint8_t>(&s, static_cast<uint8_t>(o_.scaling));
  put<int32_t>(&s, o_.margin);
  put<uint8_t>(&s, static_cast<uint8_t>(o_.amax_algo));
  put<int64_t>(&s, static_cast<int64_t>(history_.size()));
  put<float>(&s, scale_);
  put<float>(&s, scale_inv_);
  for (const float a : history_) put<float>(&s, a);
  return s;
}

void Fp8TensorScaling::deserialize(const std::string& bytes, const std::string& what) {
  size_t at = 0;
  const auto format = take<uint8_t>(bytes, &at, what);
  const auto mode = take<uint8_t>(bytes, &at, what);
  const auto margin = take<int32_t>(bytes, &at, what);
  const auto algo = take<uint8_t>(bytes, &at, what);
  const auto len = take<int64_t>(bytes, &at, what);
  if (format != static_cast<uint8_t>(format_) || mode != static_cast<uint8_t>(o_.scaling) ||
      margin != o_.margin || algo != static_cast<uint8_t>(o_.amax_algo) ||
      len != static_cast<int64_t>(history_.size()))
    throw invalid_argument(
        "FP8 scaling state saved under other settings (format, scaling, margin, amax algorithm "
        "or amax_history_len " +
            std::to_string(len) + " against " + std::to_string(history_.size()) +
            "): resume with the recipe's fp8 settings unchanged",
        what);
  const float scale = take<float>(bytes, &at, what), scale_inv = take<float>(bytes, &at, what);
  std::vector<float> history(history_.size());
  for (float& a : history) a = take<float>(bytes, &at, what);
  if (at != bytes.size())
    throw corruption(
        "FP8 scaling state: " + std::to_string(bytes.size() - at) + " bytes after its end", what);
  scale_ = scale;
  scale_inv_ = scale_inv;
  history_ = std::move(history);
}

float fp8_quantize(const float* x, float* q, int64_t n, float scale, Fp8Format format) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    const float a = std::fabs(x[i]);
    amax = std::isnan(a) || std::isnan(amax) ? NAN : std::max(amax, a);
    q[i] = fp8_round(x[i] * scale, format);
  }
  return amax;
}

}  // namespace mtnlg
