// The small GPT shape the model and checkpoint tests share: hidden 16, 2 heads, ffn 64,
// sequence and positions 8, a vocabulary of 50 padded to 64 (so padding rows are exercised).
// Tests set what they vary (layers here; dropout, init_std, positions on the result).
#pragma once

#include <cstdint>

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

}  // namespace mtnlg::test
