#include "cmd/generate.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>

#include "checkpoint/hf_import.h"
#include "checkpoint/offline.h"
#include "core/status.h"

namespace mtnlg {

void check_sampling(const SamplingOptions& o) {
  if (!(o.temperature >= 0) || !std::isfinite(o.temperature))
    throw invalid_argument("--temperature must be 0 (greedy) or positive", "--temperature");
  if (o.top_k < 0) throw invalid_argument("--top-k must be 0 (no limit) or positive", "--top-k");
  if (!(o.top_p > 0 && o.top_p <= 1))
    throw invalid_argument("--top-p must be in (0, 1] (1: no limit)", "--top-p");
}

TokenSampler::TokenSampler(const SamplingOptions& options) : options_(options), rng_(options.seed) {
  check_sampling(options_);
}

int32_t TokenSampler::pick(std::span<const float> logits) {
  const auto n = static_cast<int32_t>(logits.size());
  MTNLG_CHECK_GT(n, 0);
  if (options_.temperature == 0) {
    return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }
  order_.resize(static_cast<size_t>(n));
  std::iota(order_.begin(), order_.end(), 0);
  // Most likely first, ties by id: the candidate order every limit below cuts.
  std::stable_sort(order_.begin(), order_.end(), [&](int32_t a, int32_t b) {
    return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)];
  });
  size_t keep = order_.size();
  if (options_.top_k > 0) keep = std::min(keep, static_cast<size_t>(options_.top_k));
  const double top = logits[static_cast<size_t>(order_[0])];
  probs_.resize(keep);
  double sum = 0;
  for (size_t i = 0; i < keep; ++i) {
    probs_[i] = std::exp((logits[static_cast<size_t>(order_[i])] - top) / options_.temperature);
    sum += probs_[i];
  }
  if (options_.top_p < 1) {
    double mass = 0;
    size_t k = 0;
    while (k < keep) {
      mass += probs_[k++] / sum;
      if (mass >= options_.top_p) break;
    }
    keep = k;
    sum = std::accumulate(probs_.begin(), probs_.begin() + static_cast<ptrdiff_t>(keep), 0.0);
  }
  // A uniform double in [0, 1) from the top 53 bits.
  const double u = static_cast<double>(rng_() >> 11) * 0x1p-53 * sum;
  double acc = 0;
  for (size_t i = 0; i < keep; ++i) {
    acc += probs_[i];
    if (u < acc) return order_[i];
  }
  return order_[keep - 1];
}

std::vector<int32_t> generate(GPTDecoder& decoder, std::span<const int32_t> prompt,
                              const GenerateOptions& options, TokenSampler& sampler) {
  if (prompt.empty())
    throw invalid_argument("the prompt is empty: give at least one token", "prompt");
  if (options.max_new_tokens < 0)
    throw invalid_argument("--max-new-tokens must be 0 or more", "--max-new-tokens");
  decoder.reset();
  std::vector<int32_t> out;
  if (options.max_new_tokens == 0) return out;
  std::vector<float> logits = decoder.feed(prompt);
  for (int64_t k = 0; k < options.max_new_tokens; ++k) {
    const int32_t next = sampler.pick(logits);
    out.push_back(next);
    if (next == options.stop_token || k + 1 == options.max_new_tokens) break;
    logits = decoder.feed(std::span<const int32_t>(&next, 1));
  }
  return out;
}

AttentionBackend attention_backend_of(const ModelSource& source) {
  if (source.checkpoint.empty()) return AttentionBackend::kAuto;
  return read_checkpoint_recipe(source.checkpoint, source.recipe_overrides).model.attention_backend;
}

LoadedModel load_model(const ModelSource& source, Backend& backend, const StageLayout& layout,
                       DType dtype) {
  if (source.checkpoint.empty() == source.hf_model.empty())
    throw invalid_argument("name the weights once: --checkpoint DIR or --hf-model FILE",
                           "--checkpoint");
  if (source.seq_length < 0)
    throw invalid_argument("--seq-length must be positive", "--seq-length");
  LoadedModel out;
  if (!source.checkpoint.empty()) {
    std::vector<std::string> overrides = source.recipe_overrides;
    if (source.seq_length > 0)
      overrides.push_back("model.seq_length=" + std::to_string(source.seq_length));
    GatheredModel g = load_checkpoint_stage(source.checkpoint, backend, layout, dtype, overrides);
    out.model = std::move(g.model);
    out.recipe = std::move(g.recipe);
  } else {
    const std::string config =
        !source.hf_config.empty()
            ? source.hf_config
            : (std::filesystem::path(source.hf_model).parent_path() / "config.json").string();
    GPTConfig c = hf_gpt2_config(config);
    if (source.seq_length > c.max_positions)
      throw invalid_argument("--seq-length " + std::to_string(source.seq_length) +
                                 " exceeds the model's " + std::to_string(c.max_positions) +
                                 " positions (n_positions)",
                             "--seq-length");
    if (source.seq_length > 0) c.seq = source.seq_length;
    if (c.heads % layout.tensor != 0 || c.ffn % layout.tensor != 0 ||
        c.padded_vocab % layout.tensor != 0)
      throw invalid_argument("tensor " + std::to_string(layout.tensor) + " does not divide the " +
                                 std::to_string(c.heads) + " heads, the " + std::to_string(c.ffn) +
                                 " MLP columns (n_inner) and the " +
                                 std::to_string(c.padded_vocab) + " (padded) vocabulary rows",
                             "--tensor");
    if (c.num_layers % layout.pipeline != 0)
      throw invalid_argument("pipeline " + std::to_string(layout.pipeline) +
                                 " does not divide the " + std::to_string(c.num_layers) + " layers",
                             "--pipeline");
    c.tp_size = layout.tensor;
    c.tp_rank = layout.tensor_rank;
    out.model = std::make_unique<GPTStage>(c, pipeline_stage(c, layout.pipeline, layout.stage),
                                           backend, dtype, 0, layout.tensor_group);
    load_hf_gpt2(*out.model, source.hf_model);
  }
  out.model->set_training(false);
  return out;
}

}  // namespace mtnlg
