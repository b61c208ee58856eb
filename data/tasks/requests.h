// lm-evaluation-harness's log-likelihood requests as its causal (decoder-only) models build them
// (lm_eval/api/model.py and models/huggingface.py at 4e7e0d47):
//   - the context's trailing whitespace (str.rstrip(), in code points) moves to the front of the
//     continuation;
//   - context + continuation is encoded whole, the context alone, and the continuation's tokens
//     are the whole's after the context's count (so a merge across the boundary goes to the
//     continuation's side as the harness has it);
//   - an empty context becomes the prefix token (GPT-2's <|endoftext|>), unless the
//     continuation's first token is that token, which then becomes the context;
//   - the model's input is (context + continuation)[-(max_length + 1):][:-1]: truncated from the
//     left, the last token dropped; the continuation's log-probabilities are read at the last
//     len(continuation) positions of the input.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "data/gpt2_tokenizer.h"

namespace mtnlg::tasks {

struct TokenPair {
  std::vector<int32_t> context, continuation;
};

// _encode_pair: a non-empty context (invalid_argument otherwise).
TokenPair encode_pair(const Gpt2Tokenizer& tok, std::string_view context,
                      std::string_view continuation);

// loglikelihood's request: encode_pair, or the empty context's rule. Throws invalid_argument for
// an empty context with a continuation of no tokens.
TokenPair encode_request(const Gpt2Tokenizer& tok, std::string_view context,
                         std::string_view continuation, int32_t prefix_token);

struct ModelInput {
  std::vector<int32_t> tokens;  // what the model reads
  int64_t first_scored = 0;     // the input position whose logits score the continuation's first
};

// The window a model of max_length positions reads. Throws invalid_argument when the
// continuation alone does not fit (the harness assumes it never happens).
ModelInput causal_input(const TokenPair& p, int64_t max_length);

}  // namespace mtnlg::tasks
