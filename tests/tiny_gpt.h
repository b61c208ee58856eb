// The small GPT shape the model and checkpoint tests share: hidden 16, 2 heads, ffn 64,
// sequence and positions 8, a vocabulary of 50 padded to 64 (so padding rows are exercised).
// Tests set what they vary (layers here; dropout, init_std, positions on the result).
// token_ids: the token and target batches those tests feed it.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "model/gpt_config.h"

namespace mtnlg::test {

inline GPTConfig tiny_gpt(int64_t layers) {
  GPTConfig c;
  c.num_layers = layers;
  c.hidden = 16;
  c.heads = 2;
  c.ffn = 64;
  c.seq = 8;
  c.max_positions = 8;
  c.vocab = 50;
  c.padded_vocab = 64;
  return c;
}

// Deterministic token ids [b, s] below vocab; salt varies them between micro-batches.
inline Tensor token_ids(int64_t b, int64_t s, int64_t vocab, int salt) {
  Tensor t = Tensor::cpu({b, s}, DType::kI32);
  for (int64_t i = 0; i < b * s; ++i)
    t.data_as<int32_t>()[i] = static_cast<int32_t>((i * 37 + salt * 11 + 5) % vocab);
  return t;
}

}  // namespace mtnlg::test
