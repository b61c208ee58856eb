#include "model/gpt_decoder.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/status.h"
#include "model/gpt_params.h"

namespace mtnlg {

GPTDecoder::GPTDecoder(GPTStage& model, int64_t max_tokens)
    : model_(model), backend_(model.backend()), max_tokens_(max_tokens) {
  const GPTConfig& c = model_.config();
  const StageSpec& s = model_.stage();
  if (!s.pre_process || !s.post_process || s.first_layer != 0 || s.last_layer != c.num_layers ||
      s.num_chunks != 1 || c.tp_size != 1) {
    throw invalid_argument(
        "the decoder needs the whole model in one stage (gather tensor and "
        "pipeline shards on load)");
  }
  if (backend_.device() != Device::kCPU || model_.dtype() != DType::kF32) {
    throw invalid_argument("the decoder runs an f32 model on the CPU backend");
  }
  MTNLG_CHECK_GT(max_tokens_, 0);
  if (max_tokens_ > c.max_positions) {
    throw invalid_argument("prompt and new tokens (" + std::to_string(max_tokens_) +
                               ") exceed the model's " + std::to_string(c.max_positions) +
                               " positions; the fix: lower --max-new-tokens or shorten the prompt",
                           "--max-new-tokens");
  }
  const int64_t h = c.hidden, hd = c.head_dim();
  for (int64_t l = 0; l < c.num_layers; ++l) {
    keys_.push_back(Tensor::cpu({c.heads, max_tokens_, hd}, DType::kF32));
    values_.push_back(Tensor::cpu({c.heads, max_tokens_, hd}, DType::kF32));
  }
  x_ = Tensor::cpu({max_tokens_, h}, DType::kF32);
  ln_ = Tensor::cpu({max_tokens_, h}, DType::kF32);
  mean_ = Tensor::cpu({max_tokens_}, DType::kF32);
  rstd_ = Tensor::cpu({max_tokens_}, DType::kF32);
  qkv_ = Tensor::cpu({max_tokens_, 3 * h}, DType::kF32);
  attn_ = Tensor::cpu({max_tokens_, h}, DType::kF32);
  proj_ = Tensor::cpu({max_tokens_, h}, DType::kF32);
  fc_ = Tensor::cpu({max_tokens_, c.ffn}, DType::kF32);
  act_ = Tensor::cpu({max_tokens_, c.ffn}, DType::kF32);
  logits_ = Tensor::cpu({1, c.padded_vocab}, DType::kF32);
}

void GPTDecoder::rewind(int64_t position) {
  if (position < 0 || position > position_)
    throw invalid_argument("rewind to " + std::to_string(position) + " of " +
                               std::to_string(position_) + " tokens fed",
                           "decoder");
  position_ = position;
}

std::vector<float> GPTDecoder::feed(std::span<const int32_t> tokens) {
  embed_and_run(tokens);
  std::vector<float> out;
  head_row(static_cast<int64_t>(tokens.size()) - 1, &out);
  return out;
}

std::vector<float> GPTDecoder::feed_rows(std::span<const int32_t> tokens, int64_t first_row) {
  const auto n = static_cast<int64_t>(tokens.size());
  MTNLG_CHECK(first_row >= 0 && first_row < n);
  embed_and_run(tokens);
  std::vector<float> out;
  out.reserve(static_cast<size_t>((n - first_row) * vocab()));
  for (int64_t r = first_row; r < n; ++r) head_row(r, &out);
  return out;
}

void GPTDecoder::embed_and_run(std::span<const int32_t> tokens) {
  const GPTConfig& c = model_.config();
  const auto n = static_cast<int64_t>(tokens.size());
  MTNLG_CHECK_GT(n, 0);
  if (position_ + n > max_tokens_) {
    throw invalid_argument("the sequence would reach " + std::to_string(position_ + n) +
                               " tokens, past the decoder's " + std::to_string(max_tokens_) +
                               "; the fix: lower --max-new-tokens or shorten the prompt",
                           "--max-new-tokens");
  }
  const int64_t h = c.hidden;
  const float* wte = model_.params().get("embedding.word_embeddings.weight").value.data_as<float>();
  const float* wpe =
      model_.params().get("embedding.position_embeddings.weight").value.data_as<float>();
  float* x = x_.data_as<float>();
  for (int64_t i = 0; i < n; ++i) {
    const int32_t t = tokens[static_cast<size_t>(i)];
    if (t < 0 || t >= c.vocab) {
      throw invalid_argument("token id " + std::to_string(t) + " is outside the vocabulary [0, " +
                                 std::to_string(c.vocab) + ")",
                             "prompt");
    }
    const float* e = wte + static_cast<int64_t>(t) * h;
    const float* p = wpe + (position_ + i) * h;
    for (int64_t k = 0; k < h; ++k) x[i * h + k] = e[k] + p[k];
  }
  for (int64_t l = 0; l < c.num_layers; ++l) layer_forward(l, n);
  position_ += n;
}

void GPTDecoder::head_row(int64_t row, std::vector<float>* out) {
  // The final LayerNorm and the tied head for one row.
  const GPTConfig& c = model_.config();
  ParamRegistry& p = model_.params();
  Tensor last = x_.slice(row, row + 1), ln = ln_.slice(0, 1);
  Tensor mean = mean_.slice(0, 1), rstd = rstd_.slice(0, 1);
  backend_.layernorm_forward(ln, mean, rstd, last, p.get("final_layernorm.weight").value,
                             p.get("final_layernorm.bias").value, c.ln_eps);
  backend_.gemm(logits_, ln, false, p.get("embedding.word_embeddings.weight").value, true, 1.0,
                0.0);
  const float* lg = logits_.data_as<float>();
  out->insert(out->end(), lg, lg + c.vocab);
}

void GPTDecoder::layer_forward(int64_t layer, int64_t n) {
  const GPTConfig& c = model_.config();
  ParamRegistry& p = model_.params();
  auto w = [&](const char* suffix) -> const Tensor& {
    return p.get(layer_param(layer, suffix)).value;
  };
  const int64_t h = c.hidden, heads = c.heads, hd = c.head_dim();
  Tensor x = x_.slice(0, n), ln = ln_.slice(0, n), mean = mean_.slice(0, n),
         rstd = rstd_.slice(0, n), qkv = qkv_.slice(0, n), attn = attn_.slice(0, n),
         proj = proj_.slice(0, n), fc = fc_.slice(0, n), act = act_.slice(0, n);

  backend_.layernorm_forward(ln, mean, rstd, x, w("input_layernorm.weight"),
                             w("input_layernorm.bias"), c.ln_eps);
  backend_.gemm(qkv, ln, false, w("self_attention.query_key_value.weight"), true, 1.0, 0.0);
  backend_.add_bias(qkv, w("self_attention.query_key_value.bias"));

  // Columns of head j are (q_j, k_j, v_j): append k and v to the cache, then attend.
  const float* q = qkv.data_as<float>();
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
  float* out = attn.data_as<float>();
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
  backend_.gemm(proj, attn, false, w("self_attention.dense.weight"), true, 1.0, 0.0);
  backend_.add_bias(proj, w("self_attention.dense.bias"));
  backend_.add(x, x, proj);

  backend_.layernorm_forward(ln, mean, rstd, x, w("post_attention_layernorm.weight"),
                             w("post_attention_layernorm.bias"), c.ln_eps);
  backend_.gemm(fc, ln, false, w("mlp.dense_h_to_4h.weight"), true, 1.0, 0.0);
  backend_.add_bias(fc, w("mlp.dense_h_to_4h.bias"));
  backend_.gelu_forward(act, fc, c.activation);
  backend_.gemm(proj, act, false, w("mlp.dense_4h_to_h.weight"), true, 1.0, 0.0);
  backend_.add_bias(proj, w("mlp.dense_4h_to_h.bias"));
  backend_.add(x, x, proj);
}

}  // namespace mtnlg
