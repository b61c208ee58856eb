#include "model/gpt_decoder.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/status.h"

namespace mtnlg {
namespace {

// The cache's length, checked before any scratch is sized by it.
int64_t checked_length(const GPTStage& model, int64_t max_tokens) {
  const int64_t positions = model.config().max_positions;
  MTNLG_CHECK_GT(max_tokens, 0);
  if (max_tokens > positions) {
    throw invalid_argument("prompt and new tokens (" + std::to_string(max_tokens) +
                               ") exceed the model's " + std::to_string(positions) +
                               " positions; the fix: lower --max-new-tokens or shorten the prompt",
                           "--max-new-tokens");
  }
  return max_tokens;
}

}  // namespace

GPTDecoder::GPTDecoder(GPTStage& model, int64_t max_tokens, DecoderAttention attention)
    : rows_(model, checked_length(model, max_tokens)), max_tokens_(max_tokens) {
  const GPTConfig& c = rows_.config();
  if (attention == DecoderAttention::kHost && !rows_.on_host())
    throw invalid_argument("the host attention cache needs an f32 model on the CPU");
  device_ = attention == DecoderAttention::kDevice || !rows_.on_host();
  Backend& be = model.backend();
  for (int64_t l = 0; l < c.num_layers; ++l) {
    if (device_) {
      qkv_cache_.push_back(be.alloc({max_tokens_, 3 * c.hidden}, model.dtype()));
    } else {
      keys_.push_back(Tensor::cpu({c.heads, max_tokens_, c.head_dim()}, DType::kF32));
      values_.push_back(Tensor::cpu({c.heads, max_tokens_, c.head_dim()}, DType::kF32));
    }
  }
  if (device_) {
    attn_all_ = be.alloc({max_tokens_, c.hidden}, model.dtype());
    stats_ = be.alloc({c.heads * max_tokens_}, acc_dtype(model.dtype()));
  }
}

std::vector<float> GPTDecoder::feed(std::span<const int32_t> tokens) {
  embed_and_run(tokens);
  const int64_t last = static_cast<int64_t>(tokens.size()) - 1;
  std::vector<float> out;
  rows_.head_rows(last, 1,
                  [&](int64_t, int64_t, const float* lg) { out.assign(lg, lg + vocab()); });
  return out;
}

std::vector<float> GPTDecoder::feed_rows(std::span<const int32_t> tokens, int64_t first_row) {
  const auto n = static_cast<int64_t>(tokens.size());
  MTNLG_CHECK(first_row >= 0 && first_row < n);
  embed_and_run(tokens);
  std::vector<float> out;
  out.reserve(static_cast<size_t>((n - first_row) * vocab()));
  rows_.head_rows(first_row, n - first_row, [&](int64_t, int64_t m, const float* lg) {
    for (int64_t i = 0; i < m; ++i) {
      const float* row = lg + i * rows_.padded_vocab();
      out.insert(out.end(), row, row + vocab());
    }
  });
  return out;
}

void GPTDecoder::embed_and_run(std::span<const int32_t> tokens) {
  const GPTConfig& c = rows_.config();
  const auto n = static_cast<int64_t>(tokens.size());
  MTNLG_CHECK_GT(n, 0);
  if (position_ + n > max_tokens_) {
    throw invalid_argument("the sequence would reach " + std::to_string(position_ + n) +
                               " tokens, past the decoder's " + std::to_string(max_tokens_) +
                               "; the fix: lower --max-new-tokens or shorten the prompt",
                           "--max-new-tokens");
  }
  rows_.embed_consecutive(tokens, position_, "prompt");
  for (int64_t l = 0; l < c.num_layers; ++l)
    rows_.layer(l, n, [&](int64_t layer, const Tensor& qkv, Tensor& out) {
      if (device_) {
        attend_device(layer, n, qkv, out);
      } else {
        attend(layer, n, qkv.data_as<float>(), out.data_as<float>());
      }
    });
  position_ += n;
}

void GPTDecoder::attend_device(int64_t layer, int64_t n, const Tensor& qkv, Tensor& out) {
  const GPTConfig& c = rows_.config();
  Backend& be = rows_.backend();
  const int64_t h = c.hidden, len = position_ + n;
  Tensor& cache = qkv_cache_[static_cast<size_t>(layer)];
  Tensor fresh = cache.slice(position_, len);
  be.copy(fresh, qkv);
  // Causal attention over every cached row: row i attends to rows [0, i], so the new rows'
  // outputs are those of a forward over the whole sequence.
  Tensor all = attn_all_.slice(0, len).view({1, len, h});
  Tensor stats = stats_.slice(0, c.heads * len).view({1, c.heads, len});
  be.attention_forward(all, stats, cache.slice(0, len).view({1, len, 3 * h}), c.heads, 0.0,
                       RngStream{});
  be.copy(out, attn_all_.slice(position_, len));
}

void GPTDecoder::attend(int64_t layer, int64_t n, const float* q, float* out) {
  const GPTConfig& c = rows_.config();
  const int64_t h = c.hidden, heads = c.heads, hd = c.head_dim();
  // Columns of head j are (q_j, k_j, v_j): append k and v to the cache, then attend.
  float* kc = keys_[static_cast<size_t>(layer)].data_as<float>();
  float* vc = values_[static_cast<size_t>(layer)].data_as<float>();
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < heads; ++j) {
      const float* row = q + i * 3 * h + j * 3 * hd;
      std::copy(row + hd, row + 2 * hd, kc + (j * max_tokens_ + position_ + i) * hd);
      std::copy(row + 2 * hd, row + 3 * hd, vc + (j * max_tokens_ + position_ + i) * hd);
    }
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  std::vector<float> scores(static_cast<size_t>(position_ + n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t keys = position_ + i + 1;  // causal: positions [0, position_ + i]
    for (int64_t j = 0; j < heads; ++j) {
      const float* qi = q + i * 3 * h + j * 3 * hd;
      const float* kj = kc + j * max_tokens_ * hd;
      const float* vj = vc + j * max_tokens_ * hd;
      float top = -INFINITY;
      for (int64_t t = 0; t < keys; ++t) {
        float dot = 0;
        for (int64_t d = 0; d < hd; ++d) dot += qi[d] * kj[t * hd + d];
        scores[static_cast<size_t>(t)] = dot * scale;
        top = std::max(top, dot * scale);
      }
      float sum = 0;
      for (int64_t t = 0; t < keys; ++t) {
        scores[static_cast<size_t>(t)] = std::exp(scores[static_cast<size_t>(t)] - top);
        sum += scores[static_cast<size_t>(t)];
      }
      float* o = out + i * h + j * hd;
      std::fill(o, o + hd, 0.0f);
      for (int64_t t = 0; t < keys; ++t) {
        const float a = scores[static_cast<size_t>(t)] / sum;
        for (int64_t d = 0; d < hd; ++d) o[d] += a * vj[t * hd + d];
      }
    }
  }
}

}  // namespace mtnlg
