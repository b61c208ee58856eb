#include "model/row_forward.h"

#include <algorithm>
#include <string>

#include "core/status.h"
#include "model/gpt_params.h"

namespace mtnlg {

RowForward::RowForward(GPTStage& model, int64_t max_rows)
    : model_(model), backend_(model.backend()), max_rows_(max_rows) {
  const GPTConfig& c = model_.config();
  const StageSpec& s = model_.stage();
  if (!s.pre_process || !s.post_process || s.first_layer != 0 || s.last_layer != c.num_layers ||
      s.num_chunks != 1 || c.tp_size != 1) {
    throw invalid_argument(
        "the decoder needs the whole model in one stage (gather tensor and "
        "pipeline shards on load)");
  }
  MTNLG_CHECK_GT(max_rows_, 0);
  on_host_ = backend_.device() == Device::kCPU && model_.dtype() == DType::kF32;
  const DType dt = model_.dtype(), acc = acc_dtype(dt);
  const int64_t h = c.hidden, head_rows = std::min(kHeadRows, max_rows_);
  Backend& be = backend_;
  x_ = be.alloc({max_rows_, h}, dt);
  ln_ = be.alloc({max_rows_, h}, dt);
  mean_ = be.alloc({max_rows_}, acc);
  rstd_ = be.alloc({max_rows_}, acc);
  qkv_ = be.alloc({max_rows_, 3 * h}, dt);
  attn_ = be.alloc({max_rows_, h}, dt);
  proj_ = be.alloc({max_rows_, h}, dt);
  fc_ = be.alloc({max_rows_, c.ffn}, dt);
  act_ = be.alloc({max_rows_, c.ffn}, dt);
  head_in_ = be.alloc({head_rows, h}, dt);
  logits_ = be.alloc({head_rows, c.padded_vocab}, dt);
  tokens_ = be.alloc({1, max_rows_}, DType::kI32);
  if (!on_host_) host_logits_ = Tensor::cpu({head_rows, c.padded_vocab}, DType::kF32);
}

float* RowForward::x() {
  MTNLG_CHECK_MSG(on_host_, "RowForward::x() needs an f32 model on the CPU");
  return x_.data_as<float>();
}

void RowForward::embed_consecutive(std::span<const int32_t> tokens, int64_t first_position,
                                   const char* what) {
  const GPTConfig& c = model_.config();
  const auto n = static_cast<int64_t>(tokens.size());
  MTNLG_CHECK(n > 0 && n <= max_rows_);
  Tensor ids = Tensor::cpu({1, n}, DType::kI32);
  for (int64_t i = 0; i < n; ++i) {
    const int32_t token = tokens[static_cast<size_t>(i)];
    if (token < 0 || token >= c.vocab)
      throw invalid_argument("token id " + std::to_string(token) +
                                 " is outside the vocabulary [0, " + std::to_string(c.vocab) + ")",
                             what);
    ids.data_as<int32_t>()[i] = token;
  }
  if (first_position < 0 || first_position + n > c.max_positions)
    throw invalid_argument("position " + std::to_string(first_position + n - 1) +
                               " is past the model's " + std::to_string(c.max_positions),
                           what);
  Tensor dev = tokens_.view({max_rows_}).slice(0, n).view({1, n});
  backend_.copy(dev, ids);
  // The position table from first_position: the embedding adds its rows [0, n).
  const Tensor& wpe = model_.params().get("embedding.position_embeddings.weight").value;
  Tensor out = x_.slice(0, n).view({1, n, c.hidden});
  backend_.embedding_forward(out, dev,
                             model_.params().get("embedding.word_embeddings.weight").value,
                             wpe.slice(first_position, first_position + n));
}

void RowForward::embed(int64_t row, int32_t token, int64_t position, const char* what) {
  MTNLG_CHECK_MSG(on_host_, "RowForward::embed() needs an f32 model on the CPU");
  const GPTConfig& c = model_.config();
  MTNLG_CHECK(row >= 0 && row < max_rows_);
  if (token < 0 || token >= c.vocab) {
    throw invalid_argument("token id " + std::to_string(token) + " is outside the vocabulary [0, " +
                               std::to_string(c.vocab) + ")",
                           what);
  }
  if (position < 0 || position >= c.max_positions) {
    throw invalid_argument("position " + std::to_string(position) + " is past the model's " +
                               std::to_string(c.max_positions),
                           what);
  }
  const int64_t h = c.hidden;
  const float* e =
      model_.params().get("embedding.word_embeddings.weight").value.data_as<float>() + token * h;
  const float* p =
      model_.params().get("embedding.position_embeddings.weight").value.data_as<float>() +
      position * h;
  float* x = x_.data_as<float>() + row * h;
  for (int64_t k = 0; k < h; ++k) x[k] = e[k] + p[k];
}

void RowForward::layer(int64_t layer, int64_t n, const Attend& attend) {
  const GPTConfig& c = model_.config();
  MTNLG_CHECK(n > 0 && n <= max_rows_);
  ParamRegistry& p = model_.params();
  auto w = [&](const char* suffix) -> const Tensor& {
    return p.get(layer_param(layer, suffix)).value;
  };
  Tensor x = x_.slice(0, n), ln = ln_.slice(0, n), mean = mean_.slice(0, n),
         rstd = rstd_.slice(0, n), qkv = qkv_.slice(0, n), attn = attn_.slice(0, n),
         proj = proj_.slice(0, n), fc = fc_.slice(0, n), act = act_.slice(0, n);

  backend_.layernorm_forward(ln, mean, rstd, x, w("input_layernorm.weight"),
                             w("input_layernorm.bias"), c.ln_eps);
  backend_.gemm(qkv, ln, false, w("self_attention.query_key_value.weight"), true, 1.0, 0.0);
  backend_.add_bias(qkv, w("self_attention.query_key_value.bias"));
  attend(layer, qkv, attn);
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

void RowForward::head_rows(int64_t first, int64_t n, const EachChunk& each) {
  if (on_host_) {
    head(x() + first * model_.config().hidden, n, each);
    return;
  }
  const GPTConfig& c = model_.config();
  ParamRegistry& p = model_.params();
  const int64_t chunk = head_in_.shape()[0];
  for (int64_t r = 0; r < n; r += chunk) {
    const int64_t m = std::min(chunk, n - r);
    Tensor in = head_in_.slice(0, m), ln = ln_.slice(0, m), mean = mean_.slice(0, m),
           rstd = rstd_.slice(0, m), logits = logits_.slice(0, m), host = host_logits_.slice(0, m);
    backend_.copy(in, x_.slice(first + r, first + r + m));
    backend_.layernorm_forward(ln, mean, rstd, in, p.get("final_layernorm.weight").value,
                               p.get("final_layernorm.bias").value, c.ln_eps);
    backend_.gemm(logits, ln, false, p.get("embedding.word_embeddings.weight").value, true, 1.0,
                  0.0);
    backend_.copy(host, logits);  // widened to f32 on the way
    each(r, m, host.data_as<float>());
  }
}

void RowForward::head(const float* rows, int64_t n, const EachChunk& each) {
  MTNLG_CHECK_MSG(on_host_, "RowForward::head() needs an f32 model on the CPU");
  const GPTConfig& c = model_.config();
  ParamRegistry& p = model_.params();
  const int64_t h = c.hidden, chunk = head_in_.shape()[0];
  for (int64_t r = 0; r < n; r += chunk) {
    const int64_t m = std::min(chunk, n - r);
    Tensor in = head_in_.slice(0, m), ln = ln_.slice(0, m), mean = mean_.slice(0, m),
           rstd = rstd_.slice(0, m), logits = logits_.slice(0, m);
    // A copy: the rows may be x()'s own, and ln_ is shared scratch.
    std::copy(rows + r * h, rows + (r + m) * h, in.data_as<float>());
    backend_.layernorm_forward(ln, mean, rstd, in, p.get("final_layernorm.weight").value,
                               p.get("final_layernorm.bias").value, c.ln_eps);
    backend_.gemm(logits, ln, false, p.get("embedding.word_embeddings.weight").value, true, 1.0,
                  0.0);
    each(r, m, logits.data_as<float>());
  }
}

}  // namespace mtnlg
