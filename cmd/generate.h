// Text generation from a trained model (mtnlg-generate): token sampling and the decode loop over
// GPTDecoder's key/value cache, plus loading a model from a checkpoint or a Hugging Face file.
//
// Sampling, per new token, from the last position's logits z (the real vocabulary only):
//   temperature 0   greedy: the largest z (ties to the lowest id)
//   otherwise       softmax(z / temperature) restricted to the top_k largest (0: all) and then
//                   to the smallest set of most likely tokens whose probability reaches top_p
//                   (1: all), renormalised; one uniform draw from a 64-bit Mersenne Twister
//                   seeded with `seed` picks the token (ties in z ordered by id)
// So the same model, prompt, options and seed give the same tokens.
//
// Ownership: TokenSampler owns its generator; generate() borrows the decoder. Not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "checkpoint/offline.h"
#include "core/backend.h"
#include "model/gpt_decoder.h"

namespace mtnlg {

struct SamplingOptions {
  double temperature = 1.0;  // 0: greedy
  int64_t top_k = 0;         // 0: no limit
  double top_p = 1.0;        // 1: no limit
  uint64_t seed = 1234;
};

// Throws invalid_argument naming --temperature, --top-k or --top-p for a value out of range
// (temperature < 0, top_k < 0, top_p not in (0, 1]).
void check_sampling(const SamplingOptions& o);

class TokenSampler {
 public:
  explicit TokenSampler(const SamplingOptions& options);
  int32_t pick(std::span<const float> logits);

 private:
  SamplingOptions options_;
  std::mt19937_64 rng_;
  std::vector<int32_t> order_;
  std::vector<double> probs_;
};

struct GenerateOptions {
  int64_t max_new_tokens = 32;
  int32_t stop_token = -1;  // stop after emitting this id (the end-of-text); -1: never
};

// Feeds `prompt` (at least one token) into a reset decoder and appends up to max_new_tokens
// sampled tokens, stopping after stop_token. Returns the new tokens.
std::vector<int32_t> generate(GPTDecoder& decoder, std::span<const int32_t> prompt,
                              const GenerateOptions& options, TokenSampler& sampler);

// Where the weights come from: a checkpoint (a root or an iter_NNNNNNN directory; any tensor and
// pipeline layout, gathered) or a Hugging Face GPT-2 safetensors file with its config.json
// (hf_config; default: config.json beside the file).
struct ModelSource {
  std::string checkpoint;
  std::string hf_model;
  std::string hf_config;
  // The sequence length of the stage's forward passes (mtnlg-eval's samples); 0: the recipe's
  // seq_length for a checkpoint, n_positions for a Hugging Face model. The decoder ignores it.
  int64_t seq_length = 0;
  // --set overrides of a checkpoint's recipe (its data, for mtnlg-eval).
  std::vector<std::string> recipe_overrides;
};

// The whole model as one f32 stage on `backend` (or `layout`'s stage of it, in `dtype`), in
// evaluation mode (no dropout), and for a checkpoint the recipe it was trained with. Throws
// invalid_argument unless exactly one of checkpoint / hf_model is set (naming --checkpoint),
// naming --seq-length for a length past the model's positions, and naming --tensor or
// --pipeline for a split the model does not divide into.
struct LoadedModel {
  std::unique_ptr<GPTStage> model;
  std::optional<Recipe> recipe;  // a checkpoint's
};
LoadedModel load_model(const ModelSource& source, Backend& backend, const StageLayout& layout = {},
                       DType dtype = DType::kF32);

// The attention kernels to make the backend with for `source`: a checkpoint's recipe key
// model.attention_backend (after the source's --set overrides, so --set
// model.attention_backend=... picks others), auto for a Hugging Face model. Reads the manifest
// only; errors as load_model's.
AttentionBackend attention_backend_of(const ModelSource& source);

}  // namespace mtnlg
